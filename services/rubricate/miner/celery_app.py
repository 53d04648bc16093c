"""The miner's Celery app: `celery -A rubricate.miner.celery_app worker` (or `rubricate worker`).

Broker: Redis from RUBRICATE_MINER_BROKER_URL, else RUBRICATE_REDIS_URL. Without a broker
(embedded mode) tasks run eagerly, in process. Messages are acknowledged after the task
(acks_late) and given back when a worker process dies, and a worker that starts re-enqueues
running jobs whose heartbeat went stale, so a killed worker's job resumes from its stored
tree. Job state lives in the database, not in a Celery result backend.
"""

import logging
from typing import Any

from celery import Celery, signals

from rubricate.common.celery_observability import install
from rubricate.miner.settings import MinerSettings

log = logging.getLogger("rubricate.miner.celery")

app = Celery("rubricate.miner", include=["rubricate.miner.tasks"])


def configure(celery: Celery, settings: MinerSettings) -> None:
    celery.conf.update(
        broker_url=settings.broker_url or "memory://",
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": settings.visibility_timeout_s},
        task_always_eager=settings.runs_eagerly,
        task_eager_propagates=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        task_default_queue=settings.queue,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )


configure(app, MinerSettings())
install(app)


def _recover_stale_jobs(**_: Any) -> None:
    """Re-enqueue the jobs of workers that died (their heartbeat is older than the lease)."""
    from rubricate.miner.tasks import recover_stale_jobs

    try:
        recover_stale_jobs()
    except Exception:  # a recovery sweep must not keep the worker from starting
        log.exception("miner.recover_failed")


signals.worker_ready.connect(
    _recover_stale_jobs, weak=False, dispatch_uid="rubricate-miner-recover"
)

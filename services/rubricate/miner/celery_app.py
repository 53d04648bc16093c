"""The miner's Celery app: `celery -A rubricate.miner.celery_app worker` (or `rubricate worker`).

Broker: Redis from RUBRICATE_MINER_BROKER_URL, else RUBRICATE_REDIS_URL. Without a broker
(embedded mode) tasks run eagerly, in process. Messages are acknowledged after the task
(acks_late) and given back when a worker process dies, and a worker that starts re-enqueues
running jobs whose heartbeat went stale, so a killed worker's job resumes from its stored
tree. Job state lives in the database, not in a Celery result backend.
"""

import logging

from celery import Celery

from rubricate.common.celery_observability import install
from rubricate.mining.miner.settings import MinerSettings

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

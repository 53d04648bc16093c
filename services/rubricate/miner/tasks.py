"""Celery tasks of the miner. Each takes a job id; the job row holds everything else.

`configure_runtime` hands the tasks the API process's runtime in embedded mode; a worker
process builds its own from the environment on first use.
"""

import logging
import threading
from typing import Any

from celery import signals

from rubricate.common.embeddings import shared_embedder
from rubricate.miner.celery_app import app
from rubricate.miner.index import CorpusIndex
from rubricate.miner.repository import MinerRepository
from rubricate.miner.runner import MinerRuntime, run_job_sync
from rubricate.miner.settings import MinerSettings
from rubricate.store.db import make_engine

log = logging.getLogger("rubricate.miner.tasks")

MINE_TASK = "rubricate.miner.mine"
INGEST_TASK = "rubricate.miner.ingest"

_runtime: MinerRuntime | None = None
_lock = threading.Lock()


def build_runtime(settings: MinerSettings) -> MinerRuntime:
    engine = make_engine(settings.database_url, pool_size=2, max_overflow=4)
    index = CorpusIndex(
        embedder=lambda: shared_embedder(settings.embedding_model),
        qdrant_url=settings.qdrant_url,
        qdrant_path=settings.qdrant_path,
        api_key=settings.qdrant_api_key,
    )
    return MinerRuntime(settings=settings, engine=engine, index=index)


def configure_runtime(runtime: MinerRuntime | None) -> None:
    global _runtime
    with _lock:
        _runtime = runtime


def runtime() -> MinerRuntime:
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = build_runtime(MinerSettings())
        return _runtime


def _mine(job_id: str) -> str:
    """Run (or resume) a nugget-mining job."""
    return run_job_sync(runtime(), job_id)


def _ingest(job_id: str) -> str:
    """Run (or resume) a corpus ingestion job."""
    return run_job_sync(runtime(), job_id)


# Celery is untyped: the tasks are registered without decorators to keep the functions typed.
mine: Any = app.task(name=MINE_TASK, acks_late=True, reject_on_worker_lost=True)(_mine)
ingest: Any = app.task(name=INGEST_TASK, acks_late=True, reject_on_worker_lost=True)(_ingest)


def recover_stale_jobs(settings: MinerSettings | None = None) -> list[str]:
    """Enqueue every running job whose heartbeat is older than the lease (its worker died).

    Runs in a worker's main process at start-up: it uses an engine of its own, so nothing
    with open connections is inherited by pool processes forked later."""
    cfg = settings or MinerSettings()
    engine = make_engine(cfg.database_url, pooled=False)
    try:
        repo = MinerRepository(engine)
        found = repo.stale_jobs(lease_s=cfg.lease_s)
        for job_id in found:
            job = repo.get_job(job_id)
            if job is None:
                continue
            (mine if job.kind == "mine" else ingest).apply_async(args=[job_id], queue=cfg.queue)
            log.info("miner.job_requeued job=%s kind=%s", job_id, job.kind)
        return found
    finally:
        engine.dispose()


def _forget_inherited_runtime(**_: Any) -> None:
    """A forked pool process builds its own engine and index."""
    global _runtime
    _runtime = None


signals.worker_process_init.connect(
    _forget_inherited_runtime, weak=False, dispatch_uid="rubricate-miner-fork"
)

"""Celery tasks of the miner. Each takes a job id; the job row holds everything else.

`configure_runtime` hands the tasks the API process's runtime in embedded mode; a worker
process builds its own from the environment on first use.
"""

import logging
import threading
from typing import Any

from celery import signals

from rubricate.audit.miner.runner import AuditLoop, AuditRuntime
from rubricate.audit.miner.work import AuditWork, VerifierTarget
from rubricate.common.embeddings import shared_embedder
from rubricate.db.engine import make_engine
from rubricate.miner.celery_app import app
from rubricate.mining.miner.index import CorpusIndex
from rubricate.mining.miner.repository import MinerRepository
from rubricate.mining.miner.runner import MinerRuntime, run_job_sync
from rubricate.mining.miner.settings import MinerSettings

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


# --- the reward audit (rubricate.audit): one task per sampled group ------------------------

AUDIT_TASK = "rubricate.miner.audit"
AUDIT_REPLAY_TASK = "rubricate.miner.audit_replay"

_audit_work: AuditWork | None = None
_audit_loop: AuditLoop | None = None
_audit_override: AuditRuntime | None = None
_audit_lock = threading.Lock()


def configure_audit_runtime(runtime: AuditRuntime | None) -> None:
    """Use this runtime for every audit of the process, in the workers' tasks and in the
    in-process queue (tests, benchmarks); None: build one as configured."""
    global _audit_override
    with _audit_lock:
        _audit_override = runtime


def audit_runtime_override() -> AuditRuntime | None:
    with _audit_lock:
        return _audit_override


def verifier_target(settings: MinerSettings) -> VerifierTarget:
    return VerifierTarget(
        url=settings.verifier_url,
        timeout_s=settings.model_timeout_s,
        retries=settings.judge_retries,
    )


def _worker_audit() -> tuple[AuditLoop, AuditWork]:
    """A worker's audit loop and work, built on first use from the environment."""
    global _audit_work, _audit_loop
    with _audit_lock:
        if _audit_work is None:
            cfg = MinerSettings()
            _audit_work = AuditWork(
                engine=make_engine(cfg.database_url, pool_size=2, max_overflow=2),
                verifier=verifier_target(cfg),
                override=audit_runtime_override,
            )
        if _audit_loop is None:
            _audit_loop = AuditLoop()
        return _audit_loop, _audit_work


def _audit(tenant: str, scoring_id: str) -> str:
    """Re-score one sampled group with the reference judge and store the comparison."""
    loop, work = _worker_audit()
    return loop.run(work.audit(tenant, scoring_id))


def _audit_replay(job_id: str) -> str:
    """Run a replay job (rubricate.audit.miner.replay)."""
    loop, work = _worker_audit()
    return loop.run(work.replay(job_id))


audit: Any = app.task(name=AUDIT_TASK, acks_late=True, reject_on_worker_lost=True)(_audit)
audit_replay: Any = app.task(name=AUDIT_REPLAY_TASK, acks_late=True, reject_on_worker_lost=True)(
    _audit_replay
)


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
    """A forked pool process builds its own engine and index (and audit runtime)."""
    global _runtime, _audit_work, _audit_loop
    _runtime = None
    _audit_work = None
    _audit_loop = None


signals.worker_process_init.connect(
    _forget_inherited_runtime, weak=False, dispatch_uid="rubricate-miner-fork"
)


# Connected here, not in celery_app: the worker imports this module (the app's `include`)
# before it is ready, and celery_app stays free of an import of its tasks.
def _recover_stale_jobs(**_: Any) -> None:
    """Re-enqueue the jobs of workers that died (their heartbeat is older than the lease)."""
    try:
        recover_stale_jobs()
    except Exception:  # a recovery sweep must not keep the worker from starting
        log.exception("miner.recover_failed")


signals.worker_ready.connect(
    _recover_stale_jobs, weak=False, dispatch_uid="rubricate-miner-recover"
)

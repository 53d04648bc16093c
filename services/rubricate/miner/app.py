"""The miner service app: `create_app(settings)`; `rubricate serve miner` runs it (port 8004)."""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import text

from rubricate.audit.miner import routes as audit_routes
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.service import (
    AuditQueue,
    AuditService,
    CeleryAuditQueue,
    InProcessAuditQueue,
    refresh_signals_forever,
)
from rubricate.audit.miner.work import AuditWork
from rubricate.audit.settings import AuditSettings
from rubricate.common.app import create_service_app
from rubricate.common.queue_metrics import register_queue_depth_collector
from rubricate.db.migrate import upgrade_to_head
from rubricate.llm.base import LLMBackend
from rubricate.llm.server import TaskSettings
from rubricate.miner import celery_app, tasks
from rubricate.mining.miner.routes import router
from rubricate.mining.miner.runner import MinerRuntime
from rubricate.mining.miner.service import Dispatcher, MinerService
from rubricate.mining.miner.settings import MinerSettings

log = logging.getLogger("rubricate.miner")

DEFAULT_PORT = 8004


async def _database_ready(app: FastAPI) -> tuple[bool, str]:
    runtime: MinerRuntime = app.state.miner.runtime

    def ping() -> None:
        with runtime.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    await asyncio.to_thread(ping)
    return True, "ok"


async def _broker_ready(app: FastAPI) -> tuple[bool, str]:
    service: MinerService = app.state.miner
    if service.dispatcher.eager:
        return True, "ok"

    def ping() -> None:
        with celery_app.app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)

    await asyncio.to_thread(ping)
    return True, "ok"


def create_app(
    settings: MinerSettings | None = None,
    *,
    audit_backend: LLMBackend | None = None,
    audit_tasks: TaskSettings | None = None,
) -> FastAPI:
    """The miner app, in steps: 1. settings; at start-up (`lifespan`) 2. the runtime (database,
    index) and the job dispatcher, 3. the mining service and the audit service with its
    signal refresher, 4. the jobs a previous run left and the queue-depth gauge; stopped in
    reverse at shutdown; 5. the routers and readiness checks.

    `audit_backend`: the live model, already loaded (embedded mode), for the eager audits'
    reference judge (the same model with the other scoring design, docs/audit.md)."""
    # 1. settings
    cfg = settings or MinerSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # 2. runtime and dispatcher
        runtime = tasks.build_runtime(cfg)
        if cfg.auto_migrate:
            await asyncio.to_thread(upgrade_to_head, runtime.engine)
        dispatcher = _dispatcher(cfg, runtime)
        # 3. services
        app.state.miner = MinerService(runtime=runtime, dispatcher=dispatcher)
        audit = _audit_service(cfg, runtime, dispatcher, audit_backend, audit_tasks)
        refresher: asyncio.Task[None] | None = None
        if audit is not None:
            setattr(app.state, audit_routes.STATE_NAME, audit)
            refresher = asyncio.create_task(refresh_signals_forever(audit))
        # 4. left-over jobs, the start line and the queue gauge
        await _resume_jobs(cfg, runtime, dispatcher)
        _announce(cfg, dispatcher)
        try:
            yield
        finally:
            runtime.stopping.set()
            if refresher is not None:
                refresher.cancel()
            if audit is not None:
                await audit.queue.aclose()
            await asyncio.to_thread(dispatcher.join, 30.0)
            if dispatcher.eager:
                tasks.configure_runtime(None)
            runtime.index.close()
            runtime.engine.dispose()

    # 5. routers and readiness
    return create_service_app(
        service="miner",
        title="Rubricate miner",
        routers=[router, audit_routes.router],
        lifespan=lifespan,
        readiness=[("database", _database_ready), ("broker", _broker_ready)],
        max_body_bytes=cfg.max_body_bytes,
    )


def _dispatcher(cfg: MinerSettings, runtime: MinerRuntime) -> Dispatcher:
    """Celery configured from `cfg` and the job dispatcher on it; eager jobs (no broker)
    share this process's runtime."""
    celery_app.configure(celery_app.app, cfg)
    dispatcher = Dispatcher(cfg, tasks={"mine": tasks.mine, "ingest": tasks.ingest})
    if dispatcher.eager:
        tasks.configure_runtime(runtime)  # eager jobs share this process's runtime
    return dispatcher


def _audit_service(
    cfg: MinerSettings,
    runtime: MinerRuntime,
    dispatcher: Dispatcher,
    backend: LLMBackend | None,
    task_settings: TaskSettings | None,
) -> AuditService | None:
    """The audit service when audits are enabled: its work runs in process when jobs are
    eager, else on Celery."""
    audit_settings = AuditSettings()
    if not audit_settings.enabled:
        return None
    queue: AuditQueue
    if dispatcher.eager:
        work = AuditWork(
            engine=runtime.engine,
            verifier=tasks.verifier_target(cfg),
            settings=audit_settings,
            backend=backend,
            tasks=task_settings,
            in_process=True,
            override=tasks.audit_runtime_override,
        )
        queue = InProcessAuditQueue(audit=work.audit, replay=work.replay)
    else:
        queue = CeleryAuditQueue(audit=tasks.audit, replay=tasks.audit_replay, queue=cfg.queue)
    return AuditService(repo=AuditRepository(runtime.engine), settings=audit_settings, queue=queue)


async def _resume_jobs(cfg: MinerSettings, runtime: MinerRuntime, dispatcher: Dispatcher) -> None:
    """Eager mode: submit again the jobs a previous run left (no broker keeps them)."""
    if not dispatcher.eager:
        return
    for job_id, kind in await asyncio.to_thread(runtime.repo.resumable_jobs, lease_s=cfg.lease_s):
        dispatcher.submit(kind, job_id)


def _announce(cfg: MinerSettings, dispatcher: Dispatcher) -> None:
    """Log the start; with a Redis broker, show its backlog on /metrics here too (while no
    worker runs)."""
    log.info(
        "miner.started mode=%s qdrant=%s",
        "eager" if dispatcher.eager else "celery",
        cfg.qdrant_url or cfg.qdrant_path,
    )
    if not dispatcher.eager and (cfg.broker_url or "").startswith(("redis://", "rediss://")):
        register_queue_depth_collector(broker_url=str(cfg.broker_url), queues=[cfg.queue])

"""What runs an audit or a replay: the reference judge, built once, and the live judge (the
verifier over HTTP), for the Celery tasks (`rubricate.miner.tasks`) and for the in-process
queue of embedded mode alike. Both run on the caller's event loop."""

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Engine

from rubricate.audit.miner.reference import build_audit_runtime, reference_config
from rubricate.audit.miner.replay import ReplayRuntime, VerifierJudge, run_replay
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime, run_audit
from rubricate.audit.settings import AuditSettings
from rubricate.common.metrics import AUDIT_GROUPS
from rubricate.common.upstream import ServiceClient
from rubricate.llm.base import LLMBackend
from rubricate.llm.server import TaskSettings

log = logging.getLogger("rubricate.audit")


@dataclass(frozen=True)
class VerifierTarget:
    """The live verifier a replay calls (`RUBRICATE_MINER_VERIFIER_URL` and its limits)."""

    url: str
    timeout_s: float
    retries: int


class AuditWork:
    def __init__(
        self,
        *,
        engine: Engine,
        verifier: VerifierTarget,
        settings: AuditSettings | None = None,
        backend: LLMBackend | None = None,
        tasks: TaskSettings | None = None,
        in_process: bool = False,
        override: Callable[[], AuditRuntime | None] = lambda: None,
    ) -> None:
        """`backend`: the live model, loaded already (embedded mode), the reference judge
        when no `RUBRICATE_AUDIT_LLM_BACKEND` is set. `in_process`: audits run in the API
        process, which never loads a second model. `override`: a runtime set from outside
        (tests) wins over everything."""
        self.engine = engine
        self.verifier = verifier
        self.settings = settings or AuditSettings()
        self.backend = backend
        self.tasks = tasks
        self.in_process = in_process
        self.override = override
        self.repo = AuditRepository(engine)
        self._runtime: AuditRuntime | None = None
        self._lock = threading.Lock()

    def runtime(self) -> AuditRuntime:
        """The runtime with the reference judge, built once (blocking); raises when the
        reference judge cannot be built."""
        found = self.override()
        if found is not None:
            return found
        with self._lock:
            if self._runtime is None:
                config = reference_config()
                if config.live and self.backend is None and self.in_process:
                    raise RuntimeError(
                        "no reference judge: in-process audits use the live model only when "
                        "the platform hands it over; set RUBRICATE_AUDIT_LLM_BACKEND for a "
                        "reference of its own"
                    )
                self._runtime = build_audit_runtime(
                    self.engine,
                    audit=self.settings,
                    config=config,
                    backend=self.backend if config.live else None,
                    tasks=self.tasks,
                )
            return self._runtime

    async def audit(self, tenant: str, scoring_id: str) -> str:
        """Audit one sampled group. A reference judge that cannot be built fails the audit
        (recorded with the error), not the caller."""
        try:
            runtime = await asyncio.to_thread(self.runtime)
        except Exception as exc:  # a misconfigured reference judge: on the record
            log.warning("audit.reference_unavailable error=%s: %s", type(exc).__name__, exc)
            AUDIT_GROUPS.labels("failed").inc()
            error = f"the reference judge is not available: {type(exc).__name__}: {exc}"
            await asyncio.to_thread(
                lambda: self.repo.finish(tenant, scoring_id, result=None, error=error)
            )
            return "failed"
        return await run_audit(runtime, tenant, scoring_id)

    async def replay(self, job_id: str) -> str:
        client = ServiceClient(
            service="verifier",
            base_url=self.verifier.url,
            timeout_s=self.verifier.timeout_s,
            retries=self.verifier.retries,
        )
        try:
            return await run_replay(
                ReplayRuntime(
                    repo=self.repo,
                    live=VerifierJudge(client),
                    reference=lambda: self.runtime().judge,
                    concurrency=self.settings.judge_concurrency,
                ),
                job_id,
            )
        finally:
            await client.aclose()

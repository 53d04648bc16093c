"""The gateway's side of the audit: hand every scored group to the miner after the trainer
has its answer, and every request of the other judge kinds in which something addressed the
judge (`AuditSubmitter.addressing`, GitHub issue 25). The hand-over is a background task: the
response never waits for it, and a failed hand-over is logged and counted, never the
caller's error. With the audit disabled nothing is sent."""

import asyncio
import contextvars
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from pydantic import BaseModel

from rubricate.audit.miner.endpoints import ADDRESSING, SUBMIT
from rubricate.audit.miner.schemas import (
    MARKER_LEN,
    MAX_REPORT_MARKERS,
    AddressingReportIn,
    AuditRollout,
    AuditSubmission,
)
from rubricate.common.metrics import AUDIT_SUBMIT_FAILURES
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient, UpstreamError
from rubricate_client.endpoints import Endpoint
from rubricate_client.schemas.audit import AddressingReport
from rubricate_client.schemas.rubrics import Rubric
from rubricate_client.schemas.stagewise import StagewiseScoreRequest, StagewiseScoreResponse

log = logging.getLogger("rubricate.audit")

MAX_IN_FLIGHT = 256
"""Hand-overs in flight at once; a group scored while this many are pending is not audited
(counted in `rubricate_audit_submit_failures_total`)."""


def submission(request: StagewiseScoreRequest, response: StagewiseScoreResponse) -> AuditSubmission:
    """The scored group as the audit takes it: the trajectories, the rubric set and the live
    judgments. A scoring the store could not keep gets an audit id of its own.

    Built from parts the scoring has validated already (`model_construct`: the request's
    trajectories and the response's rubrics, spans, scores and judgments are not validated a
    second time for every hand-over); the miner validates the submission it receives, and
    answers one it cannot take with a 422 (logged and counted here, as any failed
    hand-over)."""
    rubrics = [
        Rubric.model_construct(
            id=rubric.id,
            stage=rubric.stage,
            origin=rubric.origin,
            title=rubric.title,
            description=rubric.description,
            weight=rubric.weight,
            polarity=rubric.polarity,
        )
        for stage_rubrics in response.rubrics.values()
        for rubric in stage_rubrics
    ]
    return AuditSubmission.model_construct(
        scoring_id=response.scoring_id or "au_" + uuid.uuid4().hex,
        question_id=response.question_id,
        question=request.question,
        step=request.step,
        rubrics=rubrics,
        rollouts=[
            AuditRollout.model_construct(
                id=result.id,
                trajectory=rollout.trajectory,
                spans=result.spans,
                scores=result.scores,
                judgments=result.judgments,
                fallback=None if result.fallback is None else result.fallback.kind,
            )
            for rollout, result in zip(request.rollouts, response.rollouts, strict=True)
        ],
    )


def normalized(report: AddressingReport) -> AddressingReportIn | None:
    """The report as the miner takes it: its markers once each, in order, cut to the limits;
    None when nothing was found."""
    unique = list(dict.fromkeys(m[:MARKER_LEN] for m in report.markers if m))
    if not unique and not report.flagged:
        return None
    return AddressingReportIn(
        kind=report.kind,
        step=report.step,
        items=min(report.items, 1_000_000),
        flagged=min(report.flagged, 1_000_000),
        markers=unique[:MAX_REPORT_MARKERS] or ["(flagged)"],
    )


class AuditSubmitter:
    def __init__(self, miner: ServiceClient | None) -> None:
        self.miner = miner
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(
        self, tenant: str, request: StagewiseScoreRequest, response: StagewiseScoreResponse
    ) -> None:
        """Start the hand-over and return at once. It runs in a fresh context: the scoring
        request's deadline does not bound it."""
        if self.miner is None:
            return
        self._start(self._send(tenant, request, response), what=response.question_id)

    def addressing(self, tenant: str, report: AddressingReport) -> None:
        """Hand a flagged request of another judge kind to the audit (the same background
        hand-over as a scored group; `common.addressing.AddressingReporter`). Never raises."""
        if self.miner is None:
            return
        try:
            body = normalized(report)
        except ValueError as exc:
            AUDIT_SUBMIT_FAILURES.inc()
            log.warning("audit.addressing_invalid kind=%s error=%s", report.kind, exc)
            return
        if body is not None:
            self._start(self._send_addressing(tenant, body), what=f"addressing:{report.kind}")

    def _start(self, work: Coroutine[Any, Any, None], *, what: str) -> None:
        if len(self._tasks) >= MAX_IN_FLIGHT:
            work.close()
            AUDIT_SUBMIT_FAILURES.inc()
            log.warning("audit.submit_dropped what=%s in_flight=%d", what, len(self._tasks))
            return
        task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_addressing(self, tenant: str, report: AddressingReportIn) -> None:
        await self._hand_over(
            tenant,
            ADDRESSING,
            lambda: report,
            failed=("audit.addressing_failed kind=%s error=%s", report.kind),
        )

    async def _send(
        self, tenant: str, request: StagewiseScoreRequest, response: StagewiseScoreResponse
    ) -> None:
        await self._hand_over(
            tenant,
            SUBMIT,
            lambda: submission(request, response),
            failed=("audit.submit_failed question_id=%s error=%s", response.question_id),
        )

    async def _hand_over(
        self,
        tenant: str,
        endpoint: Endpoint[Any, Any],
        body: Callable[[], BaseModel],
        *,
        failed: tuple[str, str],
    ) -> None:
        """Send `body()` to the miner's `endpoint` for `tenant`. A failure (the miner's, or
        a body that cannot be built) is counted and logged (`failed`: the log line and what
        it names), never raised. The body is serialized once, straight to JSON bytes (a
        group's trajectories are most of it), and the miner's answer is not read."""
        assert self.miner is not None
        try:
            content = body().model_dump_json().encode()
            await self.miner.send(
                endpoint.method,
                endpoint.url_path({}),
                content=content,
                headers={TENANT_HEADER: tenant, "Content-Type": "application/json"},
            )
        except (UpstreamError, ValueError) as exc:
            AUDIT_SUBMIT_FAILURES.inc()
            message, subject = failed
            log.warning(message, subject, exc)

    async def drain(self, timeout_s: float = 5.0) -> None:
        """Wait a little for the hand-overs in flight (shutdown), then cancel the rest."""
        pending = list(self._tasks)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout_s)
        for task in late:
            task.cancel()

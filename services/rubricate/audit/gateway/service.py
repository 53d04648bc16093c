"""The gateway's side of the audit: hand every scored group to the miner after the trainer
has its answer. The hand-over is a background task: the scoring's response never waits for
it, and a failed hand-over is logged and counted, never the trainer's error."""

import asyncio
import contextvars
import logging
import uuid

from rubricate.audit.miner.schemas import AuditRollout, AuditSubmission, Submitted
from rubricate.common.metrics import AUDIT_SUBMIT_FAILURES
from rubricate.common.tenancy import TENANT_HEADER
from rubricate.common.upstream import ServiceClient, UpstreamError
from rubricate_client.schemas.rubrics import Rubric
from rubricate_client.schemas.stagewise import StagewiseScoreRequest, StagewiseScoreResponse

log = logging.getLogger("rubricate.audit")

MAX_IN_FLIGHT = 256
"""Hand-overs in flight at once; a group scored while this many are pending is not audited
(counted in `rubricate_audit_submit_failures_total`)."""


def submission(request: StagewiseScoreRequest, response: StagewiseScoreResponse) -> AuditSubmission:
    """The scored group as the audit takes it: the trajectories, the rubric set and the live
    judgments. A scoring the store could not keep gets an audit id of its own."""
    rubrics = [
        Rubric(
            id=r.id,
            stage=r.stage,
            title=r.title,
            description=r.description,
            weight=r.weight,
            polarity=r.polarity,
            origin=r.origin,
        )
        for stage_rubrics in response.rubrics.values()
        for r in stage_rubrics
    ]
    return AuditSubmission(
        scoring_id=response.scoring_id or "au_" + uuid.uuid4().hex,
        question_id=response.question_id,
        question=request.question,
        step=request.step,
        rubrics=rubrics,
        rollouts=[
            AuditRollout(
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
        if len(self._tasks) >= MAX_IN_FLIGHT:
            AUDIT_SUBMIT_FAILURES.inc()
            log.warning(
                "audit.submit_dropped question_id=%s in_flight=%d",
                response.question_id,
                len(self._tasks),
            )
            return
        task = asyncio.get_running_loop().create_task(
            self._send(tenant, request, response), context=contextvars.Context()
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(
        self, tenant: str, request: StagewiseScoreRequest, response: StagewiseScoreResponse
    ) -> None:
        assert self.miner is not None
        try:
            body = submission(request, response)
            await self.miner.request(
                "POST",
                "/v1/audit/groups",
                json=body.model_dump(mode="json"),
                response_model=Submitted,
                headers={TENANT_HEADER: tenant},
            )
        except (UpstreamError, ValueError) as exc:
            AUDIT_SUBMIT_FAILURES.inc()
            log.warning("audit.submit_failed question_id=%s error=%s", response.question_id, exc)

    async def drain(self, timeout_s: float = 5.0) -> None:
        """Wait a little for the hand-overs in flight (shutdown), then cancel the rest."""
        pending = list(self._tasks)
        if not pending:
            return
        _, late = await asyncio.wait(pending, timeout=timeout_s)
        for task in late:
            task.cancel()

"""Replay: stored groups re-scored with a chosen judge, as a job with progress.

The judge is the live judge (the verifier, over HTTP: is it stable?), the reference judge,
or the live judge on the question's current rubric buffer (what would today's rubrics say?).
Each group is compared with its stored live judgments, like an audit. A group whose
trajectories are no longer kept is `unavailable`; one the judge fails on is `failed` (never
agreement); the job goes on with the next and ends `succeeded` with every group's outcome.
"""

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rubricate.audit.miner.repository import AuditRecord, AuditRepository
from rubricate.audit.miner.runner import (
    ReferenceFailed,
    ReferenceJudge,
    audit_result,
    compare_submission,
    judge_group,
)
from rubricate.audit.miner.schemas import AuditSubmission, ReplayIn
from rubricate.common.upstream import ServiceClient
from rubricate.stagewise.verifier.endpoints import STAGE_SCORES
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate_client.schemas.audit import ReplayGroup, ReplayProgress, ReplayResult

log = logging.getLogger("rubricate.audit")


class VerifierJudge:
    """The live judge: the verifier's stagewise scoring task over HTTP."""

    def __init__(self, client: ServiceClient) -> None:
        self.client = client

    async def read_answers(self, requests: Sequence[StageScoresRequest]) -> Sequence[Any]:
        """Nothing is read here: the verifier reads each answer it scores."""
        return [None] * len(requests)

    async def stage_scores(
        self, request: StageScoresRequest, *, read: Any = None
    ) -> StageScoresResponse:
        """`read` is ignored (the verifier reads the answer itself)."""
        return await self.client.call(STAGE_SCORES, request)


@dataclass
class ReplayRuntime:
    repo: AuditRepository
    live: ReferenceJudge
    reference: Callable[[], ReferenceJudge]
    """Builds (or hands back) the reference judge; raises when it cannot be built."""
    concurrency: int = 4


async def run_replay(runtime: ReplayRuntime, job_id: str) -> str:
    """Run a replay job to its end; returns its final state."""
    repo = runtime.repo
    job = await asyncio.to_thread(repo.get_replay, job_id)
    if job is None or job.state in ("succeeded", "failed"):
        return "gone" if job is None else job.state
    request = ReplayIn.model_validate(job.params)
    progress = ReplayProgress(total=0, done=0, failed=0, unavailable=0)
    try:
        judge = runtime.reference() if request.judge == "reference" else runtime.live
        records = await asyncio.to_thread(
            lambda: repo.replay_groups(
                job.tenant,
                scoring_ids=request.scoring_ids,
                question_id=request.question_id,
                step_from=request.step_from,
                step_to=request.step_to,
                limit=request.limit,
            )
        )
    except Exception as exc:  # nothing replayed: the job fails, saying why
        error = f"{type(exc).__name__}: {exc}"
        await asyncio.to_thread(
            lambda: repo.update_replay(
                job_id, state="failed", progress=progress.model_dump(), error=error
            )
        )
        log.warning("audit.replay_failed job=%s error=%s", job_id, error)
        return "failed"
    progress.total = len(records)
    await _save(repo, job_id, "running", progress)
    groups: list[ReplayGroup] = []
    for record in records:
        group = await _replay_one(runtime, judge, request, record)
        groups.append(group)
        if group.status == "done":
            progress.done += 1
        elif group.status == "failed":
            progress.failed += 1
        else:
            progress.unavailable += 1
        await _save(repo, job_id, "running", progress)
    agreements = [g.agreement for g in groups if g.agreement is not None]
    result = ReplayResult(
        agreement=sum(agreements) / len(agreements) if agreements else None, groups=groups
    )
    await asyncio.to_thread(
        lambda: repo.update_replay(
            job_id,
            state="succeeded",
            progress=progress.model_dump(),
            result=result.model_dump(mode="json"),
        )
    )
    log.info(
        "audit.replayed job=%s judge=%s done=%d failed=%d unavailable=%d",
        job_id,
        request.judge,
        progress.done,
        progress.failed,
        progress.unavailable,
    )
    return "succeeded"


async def _replay_one(
    runtime: ReplayRuntime, judge: ReferenceJudge, request: ReplayIn, record: AuditRecord
) -> ReplayGroup:
    base = {"scoring_id": record.scoring_id, "question_id": record.question_id, "step": record.step}
    if record.group is None:
        return ReplayGroup(**base, status="unavailable")
    submission = AuditSubmission.model_validate(record.group)
    rubrics = request.rubrics if request.judge == "buffer" else None
    try:
        judged = await judge_group(
            judge, submission, concurrency=runtime.concurrency, rubrics=rubrics
        )
    except ReferenceFailed as exc:
        return ReplayGroup(**base, status="failed", error=str(exc))
    result = audit_result(
        compare_submission(submission, judged, rubrics=rubrics), model="", design=""
    )
    return ReplayGroup(
        **base,
        status="done",
        agreement=result.agreement,
        kendall_tau=result.kendall_tau,
        best_changed=result.best_changed,
        rollout_deltas=result.rollout_deltas,
        rubrics=result.rubrics,
    )


async def _save(repo: AuditRepository, job_id: str, state: str, progress: ReplayProgress) -> None:
    await asyncio.to_thread(
        lambda: repo.update_replay(job_id, state=state, progress=progress.model_dump())
    )

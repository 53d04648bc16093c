"""One audit: the reference judge re-scores a sampled group on the same rubric set, and the
comparison is stored. Runs in a Celery worker (or a thread of the miner in embedded mode).

The reference judge scores, for each rollout, exactly the rubrics the live judge scored on
it (an answer-only fallback's answer rubrics; nothing for an unscored rollout). A stage is
compared only where the live judge scored it itself: stages a rollout lacks and stages an
answer-only fallback broadcast to are left out. A reference judge that fails on any rollout
fails the audit (`failed`, with the error), never counted as agreement.

The reference judge's calls go in the background lane of its backend's call limiter
(`llm.limiter.background_work`): where it is the live model (embedded mode) they start only
when no live call waits, and hold at most `RUBRICATE_LLM_BACKGROUND_SHARE` of the limit."""

import asyncio
import logging
import threading
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from rubricate.audit.domain.agreement import GroupComparison, compare_group
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.schemas import AuditRollout, AuditSubmission
from rubricate.common.metrics import AUDIT_AGREEMENT, AUDIT_GROUPS, AUDIT_RANK_TAU
from rubricate.llm.limiter import background_work
from rubricate.stagewise.domain.scoring import stage_score
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate_client.constants import STAGES
from rubricate_client.schemas.audit import AuditResult, RubricAgreementView
from rubricate_client.schemas.rubrics import Judgment, Rubric, Stage

log = logging.getLogger("rubricate.audit")

T = TypeVar("T")


class ReferenceJudge(Protocol):
    """What the audit needs of a judge: the verifier's stagewise scoring task
    (`rubricate.stagewise.verifier.service.StageScoringService` on the reference backend):
    a group's answers read in one pass, then each trajectory scored with its reading."""

    async def read_answers(self, requests: Sequence[StageScoresRequest]) -> Sequence[Any]:
        """One reading per request, handed back to `stage_scores` as `read` (opaque here)."""
        ...

    async def stage_scores(
        self, request: StageScoresRequest, *, read: Any = ...
    ) -> StageScoresResponse: ...


@dataclass
class AuditRuntime:
    repo: AuditRepository
    judge: ReferenceJudge
    model: str
    """The reference judge's model, recorded with each result."""
    design: str
    """The reference judge's scoring design."""
    concurrency: int = 4


class ReferenceFailed(Exception):
    """The judge of an audit or a replay could not score a rollout (after its retries)."""


async def run_audit(runtime: AuditRuntime, tenant: str, scoring_id: str) -> str:
    """Audit one pending group; returns its new status (`done` | `failed`), or `gone` when
    it is not pending (already audited, deleted, or never sampled)."""
    record = await asyncio.to_thread(runtime.repo.pending_group, tenant, scoring_id)
    if record is None or record.group is None:
        return "gone"
    submission = AuditSubmission.model_validate(record.group)
    try:
        reference = await judge_group(runtime.judge, submission, concurrency=runtime.concurrency)
    except ReferenceFailed as exc:
        await asyncio.to_thread(
            runtime.repo.finish, tenant, scoring_id, result=None, error=str(exc)
        )
        AUDIT_GROUPS.labels("failed").inc()
        log.warning("audit.failed scoring_id=%s error=%s", scoring_id, exc)
        return "failed"
    comparison = compare_submission(submission, reference)
    result = audit_result(comparison, model=runtime.model, design=runtime.design)
    await asyncio.to_thread(
        runtime.repo.finish, tenant, scoring_id, result=result.model_dump(mode="json"), error=None
    )
    AUDIT_GROUPS.labels("done").inc()
    if result.agreement is not None:
        AUDIT_AGREEMENT.observe(result.agreement)
    if result.kendall_tau is not None:
        AUDIT_RANK_TAU.observe(result.kendall_tau)
    log.info(
        "audit.done scoring_id=%s question_id=%s agreement=%s tau=%s best_changed=%s",
        scoring_id,
        submission.question_id,
        result.agreement,
        result.kendall_tau,
        result.best_changed,
    )
    return "done"


class AuditLoop:
    """One event loop, in a thread of its own, for every audit of a process: the reference
    judge's backend (an HTTP client pool, the embedded model's lock) is built once and bound
    to this loop, so Celery's synchronous tasks hand their audits to it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="audit-loop", daemon=True
        )
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the loop and wait for its result (from any other thread)."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)


async def judge_group(
    judge: ReferenceJudge,
    submission: AuditSubmission,
    *,
    concurrency: int,
    rubrics: Sequence[Rubric] | None = None,
) -> dict[str, list[Judgment]]:
    """Score every rollout the live judge scored. Without `rubrics`: on exactly the rubrics
    the live judge scored it on; with them (a replay on the current buffer): on those of
    them whose stage the rollout has. The group's answers are read in one pass first (as
    the live verifier reads a group), then each rollout is scored with its reading. Any
    failure raises `ReferenceFailed`."""
    gate = asyncio.Semaphore(concurrency)
    by_id = {r.id: r for r in submission.rubrics}
    requests: dict[str, StageScoresRequest] = {}
    for rollout in submission.rollouts:
        if rubrics is None:
            judged = _judged_rubrics(rollout, by_id)
        elif rollout.scores is None or not rollout.judgments:
            judged = []
        else:
            judged = [r for r in rubrics if rollout.spans.get(r.stage) is not None]
        if judged:
            requests[rollout.id] = StageScoresRequest(
                question=submission.question,
                stages={s: rollout.stage_text(s) for s in STAGES},
                rubrics=judged,
            )
    if not requests:
        return {rollout.id: [] for rollout in submission.rollouts}
    try:
        with background_work():  # live scoring on a shared model goes first
            readings = await judge.read_answers(list(requests.values()))
    except Exception as exc:  # any failure of the judge fails the audit, never agrees
        raise ReferenceFailed(
            f"the judge failed reading the answers: {type(exc).__name__}: {exc}"
        ) from exc
    read = dict(zip(requests, readings, strict=True))

    async def one(rollout: AuditRollout) -> tuple[str, list[Judgment]]:
        request = requests.get(rollout.id)
        if request is None:
            return rollout.id, []
        async with gate:
            try:
                with background_work():
                    out = await judge.stage_scores(request, read=read[rollout.id])
            except Exception as exc:  # any failure of the judge fails the audit, never agrees
                raise ReferenceFailed(
                    f"the judge failed on rollout {rollout.id!r}: {type(exc).__name__}: {exc}"
                ) from exc
        return rollout.id, out.judgments

    pairs = await asyncio.gather(*(one(r) for r in submission.rollouts))
    return dict(pairs)


def _judged_rubrics(rollout: AuditRollout, by_id: Mapping[str, Rubric]) -> list[Rubric]:
    """The rubrics the live judge scored on this rollout, in the set's order."""
    ids = {j.rubric_id for j in rollout.judgments}
    return [r for rid, r in by_id.items() if rid in ids]


def compare_submission(
    submission: AuditSubmission,
    reference: Mapping[str, Sequence[Judgment]],
    *,
    rubrics: Sequence[Rubric] | None = None,
) -> GroupComparison:
    """The stored live judgments against `reference` (scored on `rubrics`, default the
    group's own rubric set)."""
    by_id = {r.id: r for r in (submission.rubrics if rubrics is None else rubrics)}
    live_rubrics: dict[str, dict[str, float]] = {}
    reference_rubrics: dict[str, dict[str, float]] = {}
    live_stages: dict[str, dict[Stage, float | None]] = {}
    reference_stages: dict[str, dict[Stage, float | None]] = {}
    for rollout in submission.rollouts:
        if rollout.scores is None or not rollout.judgments:
            continue
        theirs = list(reference.get(rollout.id, []))
        live_rubrics[rollout.id] = {j.rubric_id: j.value for j in rollout.judgments}
        reference_rubrics[rollout.id] = {j.rubric_id: j.value for j in theirs}
        compared = _compared_stages(rollout)
        live_stages[rollout.id] = {s: rollout.scores.get(s) for s in compared}
        reference_stages[rollout.id] = _stage_scores(
            [by_id[j.rubric_id] for j in theirs if j.rubric_id in by_id], theirs, compared
        )
    return compare_group(
        live_rubrics=live_rubrics,
        reference_rubrics=reference_rubrics,
        live_stages=live_stages,
        reference_stages=reference_stages,
    )


def _compared_stages(rollout: AuditRollout) -> list[Stage]:
    judged = {j.stage for j in rollout.judgments}
    return [s for s in STAGES if s in judged and rollout.spans.get(s) is not None]


def _stage_scores(
    rubrics: Sequence[Rubric], judgments: Sequence[Judgment], stages: Sequence[Stage]
) -> dict[Stage, float | None]:
    by_rubric = {j.rubric_id: j for j in judgments}
    return {s: stage_score(rubrics, by_rubric, stage=s) for s in stages}


def audit_result(comparison: GroupComparison, *, model: str, design: str) -> AuditResult:
    both = set(comparison.live_rewards) & set(comparison.reference_rewards)
    return AuditResult(
        agreement=comparison.agreement,
        rubrics=[
            RubricAgreementView.model_validate(r, from_attributes=True) for r in comparison.rubrics
        ],
        stage_deltas=comparison.stage_deltas,
        kendall_tau=comparison.kendall_tau,
        best_changed=comparison.best_changed,
        live_best=comparison.live_best,
        reference_best=comparison.reference_best,
        rollout_deltas={
            k: comparison.reference_rewards[k] - comparison.live_rewards[k] for k in sorted(both)
        },
        reference_model=model,
        reference_design=design,
    )

"""The audit on the miner: take submissions, queue audits, read audits and signals.

`submit` records every scored group (its summary counts for the length and judge-addressing
signals) and queues the sampled ones for the reference judge; nothing here waits for a judge.
"""

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol, get_args

from sqlalchemy.exc import SQLAlchemyError

from rubricate.audit.domain.agreement import rollout_reward
from rubricate.audit.domain.signals import (
    RubricPoint,
    agreement_drift,
    gaming_candidates,
    pearson,
)
from rubricate.audit.miner.repository import (
    AddressingRecord,
    AuditRecord,
    AuditRepository,
    KeptGroup,
    QuestionAuditCounts,
    ReplayRecord,
    TenantAuditSettings,
)
from rubricate.audit.miner.schemas import (
    AddressingReportIn,
    AuditSubmission,
    Recorded,
    ReplayIn,
    Submitted,
)
from rubricate.audit.settings import AuditSettings
from rubricate.common.metrics import (
    AUDIT_ADDRESSING_FLAGGED,
    AUDIT_ADDRESSING_ROLLOUTS,
    AUDIT_AGREEMENT_DROP,
    AUDIT_AGREEMENT_LAST,
    AUDIT_GAMING_CANDIDATES,
    AUDIT_GROUPS,
    AUDIT_LENGTH_CORRELATION,
)
from rubricate.db.base import utcnow
from rubricate.db.rows import from_row
from rubricate.llm.prompt_text import manipulation_markers
from rubricate.stagewise.domain.scoring import refused_credit
from rubricate_client.schemas.audit import (
    AddressingKind,
    AddressingKindCount,
    AddressingRequestView,
    AddressingView,
    AuditList,
    AuditResult,
    AuditSignals,
    AuditTenantSettings,
    AuditView,
    GamingCandidateView,
    QuestionAudit,
    QuestionAuditList,
    ReplayJob,
    ReplayJobList,
    ReplayProgress,
    ReplayResult,
    ScoringTrajectories,
    StepSignals,
)

log = logging.getLogger("rubricate.audit")

MAX_ADDRESSING_LISTED = 100


class AuditTask(Protocol):
    """A Celery task, as far as the audit queues it."""

    def apply_async(self, *, args: list[str], queue: str) -> Any: ...


class AuditQueue(Protocol):
    """Where sampled groups and replay jobs go: Celery, or this process's event loop."""

    def submit(self, tenant: str, scoring_id: str) -> None: ...
    def replay(self, job_id: str) -> None: ...
    async def aclose(self) -> None: ...


class CeleryAuditQueue:
    def __init__(self, *, audit: AuditTask, replay: AuditTask, queue: str) -> None:
        self.tasks = {"audit": audit, "replay": replay}
        self.queue = queue

    def submit(self, tenant: str, scoring_id: str) -> None:
        self.tasks["audit"].apply_async(args=[tenant, scoring_id], queue=self.queue)

    def replay(self, job_id: str) -> None:
        self.tasks["replay"].apply_async(args=[job_id], queue=self.queue)

    async def aclose(self) -> None:
        return None


class InProcessAuditQueue:
    """Embedded mode (no broker): audits and replays run as tasks of this process's event
    loop, after the submission has been answered. On the loop, not in a thread: the
    reference judge may be the live model, whose backend belongs to this loop. Stopping
    cancels what is left (those audits stay `pending`)."""

    def __init__(
        self,
        *,
        audit: Callable[[str, str], Awaitable[object]],
        replay: Callable[[str], Awaitable[object]],
    ) -> None:
        self._audit = audit
        self._replay = replay
        self._running: set[asyncio.Task[None]] = set()

    def submit(self, tenant: str, scoring_id: str) -> None:
        self._start(self._audit(tenant, scoring_id), f"audit-{scoring_id}")

    def replay(self, job_id: str) -> None:
        self._start(self._replay(job_id), f"replay-{job_id}")

    def _start(self, work: Awaitable[object], name: str) -> None:
        async def guarded() -> None:
            try:
                await work
            except Exception:  # recorded by the work itself where it can be; never raised
                log.exception("audit.in_process_failed task=%s", name)

        task = asyncio.get_running_loop().create_task(guarded(), name=name)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def drain(self) -> None:
        """Wait for everything queued so far (tests, benchmarks)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def aclose(self) -> None:
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


def summarize(submission: AuditSubmission) -> dict[str, Any]:
    """What every scored group keeps: live rewards, trajectory lengths, judge addressing,
    and per rollout the answer verdicts refused and the credit they claimed ([count,
    credit], `stagewise.domain.scoring.refused_credit`; issue 32)."""
    rewards: dict[str, float] = {}
    for rollout in submission.rollouts:
        reward = None if rollout.scores is None else rollout_reward(rollout.scores)
        if reward is not None:
            rewards[rollout.id] = reward
    addressing = {}
    for rollout in submission.rollouts:
        markers = manipulation_markers(rollout.trajectory)
        if markers:
            addressing[rollout.id] = markers
    refused: dict[str, list[float]] = {}
    for rollout in submission.rollouts:
        count, credit = refused_credit(submission.rubrics, rollout.judgments)
        if count:
            refused[rollout.id] = [float(count), credit]
    return {
        "rewards": rewards,
        "lengths": {r.id: len(r.trajectory) for r in submission.rollouts},
        "addressing": addressing,
        "refused": refused,
    }


def _length_pairs(summaries: Sequence[dict[str, Any]]) -> tuple[list[float], list[float]]:
    rewards: list[float] = []
    lengths: list[float] = []
    for summary in summaries:
        for rollout_id, reward in summary.get("rewards", {}).items():
            length = summary.get("lengths", {}).get(rollout_id)
            if length is not None:
                rewards.append(float(reward))
                lengths.append(float(length))
    return rewards, lengths


def view(record: AuditRecord) -> AuditView:
    rewards, lengths = _length_pairs([record.summary])
    return from_row(
        AuditView,
        record,
        addressing=dict(record.summary.get("addressing", {})),
        length_reward_correlation=pearson(lengths, rewards),
        result=None if record.result is None else AuditResult.model_validate(record.result),
    )


def replay_view(job: ReplayRecord) -> ReplayJob:
    return ReplayJob(
        id=job.id,
        state=job.state,
        judge=job.params.get("judge", "reference"),
        progress=ReplayProgress.model_validate(job.progress),
        result=None if job.result is None else ReplayResult.model_validate(job.result),
        error=job.error,
        created_at=job.created_at,
        finished_at=job.finished_at,
    )


def question_audit_view(counts: QuestionAuditCounts) -> QuestionAudit:
    return QuestionAudit.model_validate(counts, from_attributes=True)


def trajectories_view(scoring_id: str, kept: KeptGroup) -> ScoringTrajectories:
    """Rollout id → trajectory of the kept submission (None when not kept)."""
    trajectories: dict[str, str] | None = None
    if kept.submission is not None:
        trajectories = {
            str(rollout["id"]): str(rollout["trajectory"])
            for rollout in kept.submission.get("rollouts", [])
        }
    return ScoringTrajectories(
        scoring_id=scoring_id, question_id=kept.question_id, trajectories=trajectories
    )


def addressing_by_kind(flags: Sequence[AddressingRecord]) -> dict[str, AddressingKindCount]:
    """Flagged requests of the other judge kinds, summed by kind."""
    out: dict[str, AddressingKindCount] = {}
    for flag in flags:
        count = out.setdefault(flag.kind, AddressingKindCount(requests=0, items=0, flagged=0))
        count.requests += 1
        count.items += flag.items
        count.flagged += flag.flagged
    return out


@dataclass(frozen=True)
class StepPart:
    """What one training step's records contribute to the signals (`step_part`): its
    counts and means, its audited rubrics' live and reference means, the rollouts that
    addressed the judge. A step whose records did not change keeps its part
    (`AuditService.tenant_signals`)."""

    signals: StepSignals
    points: list[tuple[tuple[str, str], RubricPoint]]
    """((question id, rubric id), the rubric's means in this step), one per audited group."""
    addressed: list[AddressingView]


def step_part(step: int, group: Sequence[AuditRecord]) -> StepPart:
    return StepPart(
        signals=_step_signals(step, group),
        points=_rubric_points(step, group),
        addressed=_addressed_rollouts(group),
    )


def compute_signals(
    records: Sequence[AuditRecord],
    *,
    question_id: str | None,
    settings: AuditSettings,
    flags: Sequence[AddressingRecord] = (),
) -> AuditSignals:
    """The signals of the records (stagewise groups, per step) and, unless restricted to a
    question, of the flagged requests of the other kinds (`flags`, within the window)."""
    parts = [step_part(step, group) for step, group in _by_step(records).items()]
    return signals_of(parts, question_id=question_id, settings=settings, flags=flags)


def signals_of(
    parts: Sequence[StepPart],
    *,
    question_id: str | None,
    settings: AuditSettings,
    flags: Sequence[AddressingRecord] = (),
) -> AuditSignals:
    """The signals of the steps' parts, in step order (`compute_signals`)."""
    steps = [p.signals for p in parts]
    drift = agreement_drift(
        [(s.step, s.agreement) for s in steps if s.agreement is not None],
        window=settings.drift_window,
    )
    series: dict[tuple[str, str], list[RubricPoint]] = {}
    for part in parts:
        for key, point in part.points:
            series.setdefault(key, []).append(point)
    addressed = [view for part in parts for view in part.addressed]
    return AuditSignals(
        question_id=question_id,
        steps=steps,
        agreement_first=drift.first,
        agreement_last=drift.last,
        agreement_drop=drift.drop,
        gaming_candidates=_gaming_candidates(series, settings),
        addressing=addressed[-MAX_ADDRESSING_LISTED:],
        addressing_window_h=settings.addressing_window_h,
        addressing_by_kind=addressing_by_kind(flags),
        addressing_requests=[
            AddressingRequestView.model_validate(flag, from_attributes=True)
            for flag in flags[-MAX_ADDRESSING_LISTED:]
        ],
    )


def _by_step(records: Sequence[AuditRecord]) -> dict[int, list[AuditRecord]]:
    """The records of a known step, grouped by step in step order."""
    by_step: dict[int, list[AuditRecord]] = {}
    for record in records:
        if record.step is not None:
            by_step.setdefault(record.step, []).append(record)
    return dict(sorted(by_step.items()))


def _done(group: Sequence[AuditRecord]) -> list[AuditRecord]:
    return [r for r in group if r.status == "done" and r.result is not None]


def _step_signals(step: int, group: Sequence[AuditRecord]) -> StepSignals:
    """One step's counts, mean agreement, length-reward correlation and addressing."""
    done = _done(group)
    agreements = [
        float(r.result["agreement"])
        for r in done
        if r.result is not None and r.result.get("agreement") is not None
    ]
    rewards, lengths = _length_pairs([r.summary for r in group])
    return StepSignals(
        step=step,
        groups=len(group),
        audited=len(done),
        failed=sum(1 for r in group if r.status == "failed"),
        agreement=sum(agreements) / len(agreements) if agreements else None,
        length_reward_correlation=pearson(lengths, rewards),
        addressing_rollouts=sum(len(r.summary.get("addressing", {})) for r in group),
        refused_rollouts=sum(len(r.summary.get("refused", {})) for r in group),
        refused_credit=_mean_refused_credit(group),
    )


def _mean_refused_credit(group: Sequence[AuditRecord]) -> float | None:
    """The mean refused credit over the step's scored rollouts (None: no rollout known)."""
    rollouts = sum(len(r.summary.get("rewards", {})) for r in group)
    if not rollouts:
        return None
    total = sum(float(v[1]) for r in group for v in r.summary.get("refused", {}).values())
    return total / rollouts


def _rubric_points(
    step: int, group: Sequence[AuditRecord]
) -> list[tuple[tuple[str, str], RubricPoint]]:
    """((question id, rubric id), its live and reference means) of the step's audited groups."""
    points: list[tuple[tuple[str, str], RubricPoint]] = []
    for r in _done(group):
        assert r.result is not None
        for rubric in r.result.get("rubrics", []):
            point = RubricPoint(
                step=step, live=rubric["live_mean"], reference=rubric["reference_mean"]
            )
            points.append(((r.question_id, rubric["rubric_id"]), point))
    return points


def _gaming_candidates(
    series: dict[tuple[str, str], list[RubricPoint]], settings: AuditSettings
) -> list[GamingCandidateView]:
    """The rubrics whose live score rose while the reference's did not, question by question."""
    candidates: list[GamingCandidateView] = []
    for question in sorted({q for q, _ in series}):
        found = gaming_candidates(
            {rid: pts for (q, rid), pts in series.items() if q == question},
            min_steps=settings.gaming_min_steps,
            min_rise=settings.gaming_min_rise,
        )
        candidates.extend(GamingCandidateView(question_id=question, **asdict(c)) for c in found)
    return candidates


def _addressed_rollouts(group: Sequence[AuditRecord]) -> list[AddressingView]:
    """Every rollout of the step's groups whose trajectory addresses the judge."""
    return [
        AddressingView(
            scoring_id=r.scoring_id,
            question_id=r.question_id,
            step=r.step,
            rollout_id=rollout_id,
            markers=list(markers),
        )
        for r in group
        for rollout_id, markers in r.summary.get("addressing", {}).items()
    ]


class AuditService:
    def __init__(
        self, *, repo: AuditRepository, settings: AuditSettings, queue: AuditQueue
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.queue = queue
        self._published: tuple[Any, ...] | None = None
        """The records' fingerprint the gauges were last computed from."""
        self._parts: dict[tuple[str, int], tuple[tuple[Any, ...], StepPart]] = {}
        """(tenant, step) → the step's fingerprint and part when last read (`tenant_signals`)."""

    async def submit(self, submission: AuditSubmission, *, tenant: str) -> Submitted:
        status, created = await asyncio.to_thread(self._record, submission, tenant)
        if created:
            AUDIT_GROUPS.labels(status).inc()
            if status == "pending":
                self.queue.submit(tenant, submission.scoring_id)
        return Submitted(scoring_id=submission.scoring_id, status=status)

    def _record(self, submission: AuditSubmission, tenant: str) -> tuple[str, bool]:
        """Summarize and record a submission (blocking: one hop to a thread for both)."""
        return self.repo.submit(
            tenant,
            submission,
            summary=summarize(submission),
            default_fraction=self.settings.fraction,
            max_share=self.settings.max_share,
            default_retention_days=self.settings.retention_days,
        )

    async def record_addressing(self, report: AddressingReportIn, *, tenant: str) -> Recorded:
        """Keep a flagged request of another judge kind for the signals."""
        row_id = await asyncio.to_thread(self.repo.record_addressing, tenant, report)
        return Recorded(id=row_id)

    def _addressing_since(self) -> datetime:
        return utcnow() - timedelta(hours=self.settings.addressing_window_h)

    async def get(self, tenant: str, scoring_id: str) -> AuditView | None:
        record = await asyncio.to_thread(self.repo.get, tenant, scoring_id)
        return None if record is None else view(record)

    async def latest(self, tenant: str, *, question_id: str | None, limit: int) -> AuditList:
        records = await asyncio.to_thread(
            lambda: self.repo.latest(tenant, question_id=question_id, limit=limit)
        )
        return AuditList(audits=[view(r) for r in records])

    async def signals(self, tenant: str, *, question_id: str | None) -> AuditSignals:
        records = await asyncio.to_thread(
            lambda: self.repo.recent_steps(
                tenant, question_id=question_id, steps=self.settings.signal_steps
            )
        )
        flags: list[AddressingRecord] = []
        if question_id is None:  # flagged requests of the other kinds have no question
            since = self._addressing_since()
            flags = await asyncio.to_thread(
                lambda: self.repo.recent_addressing(tenant, since=since)
            )
        return compute_signals(
            records, question_id=question_id, settings=self.settings, flags=flags
        )

    async def replay(self, body: ReplayIn, *, tenant: str) -> ReplayJob:
        job = await asyncio.to_thread(self.repo.create_replay, tenant, body.model_dump(mode="json"))
        self.queue.replay(job.id)
        return replay_view(job)

    async def replay_job(self, tenant: str, job_id: str) -> ReplayJob | None:
        job = await asyncio.to_thread(lambda: self.repo.get_replay(job_id, tenant=tenant))
        return None if job is None else replay_view(job)

    async def replay_jobs(self, tenant: str, *, limit: int) -> ReplayJobList:
        """The tenant's replay jobs, newest first, without results (`replay_job` has it)."""
        jobs = await asyncio.to_thread(lambda: self.repo.list_replays(tenant, limit=limit))
        return ReplayJobList(jobs=[replay_view(job) for job in jobs])

    async def question_audits(self, tenant: str, question_ids: list[str]) -> QuestionAuditList:
        found = await asyncio.to_thread(self.repo.question_audits, tenant, question_ids)
        order = {question_id: i for i, question_id in enumerate(question_ids)}
        found.sort(key=lambda counts: order.get(counts.question_id, len(order)))
        return QuestionAuditList(questions=[question_audit_view(c) for c in found])

    async def trajectories(self, tenant: str, scoring_id: str) -> ScoringTrajectories | None:
        kept = await asyncio.to_thread(self.repo.kept_group, tenant, scoring_id)
        return None if kept is None else trajectories_view(scoring_id, kept)

    async def tenant_settings(self, tenant: str) -> AuditTenantSettings:
        own = await asyncio.to_thread(self.repo.tenant_settings, tenant)
        return AuditTenantSettings(fraction=own.fraction, retention_days=own.retention_days)

    async def put_tenant_settings(
        self, tenant: str, body: AuditTenantSettings
    ) -> AuditTenantSettings:
        await asyncio.to_thread(
            self.repo.put_tenant_settings,
            tenant,
            TenantAuditSettings(fraction=body.fraction, retention_days=body.retention_days),
        )
        return body

    async def delete(self, tenant: str, *, question_id: str | None) -> int:
        return await asyncio.to_thread(lambda: self.repo.delete(tenant, question_id=question_id))

    def publish_signals(self) -> bool:
        """Recompute every tenant's signals and set the gauges to the worst tenant's value
        (blocking; call from a thread); whether they were recomputed. Also drops the
        trajectories whose retention ran out. When no record changed since the last time
        (`AuditRepository.fingerprint`: nothing added, finished, deleted or expired) the
        gauges already hold these values and nothing is read: the refresh costs one query
        while the audit is idle, not a read of every tenant's recent steps."""
        self.repo.expire(addressing_before=self._addressing_since())
        seen = self.repo.fingerprint()
        if seen == self._published:
            return False
        lows: list[float] = []
        drops: list[float] = []
        correlations: list[float] = []
        candidates = 0
        flagged = 0
        parts: dict[tuple[str, int], tuple[tuple[Any, ...], StepPart]] = {}
        for tenant in self.repo.tenants():
            signals = self.tenant_signals(tenant, parts=parts)
            audited = [s for s in signals.steps if s.agreement is not None]
            if audited and audited[-1].agreement is not None:
                lows.append(audited[-1].agreement)
            if signals.agreement_drop is not None:
                drops.append(signals.agreement_drop)
            if signals.steps and signals.steps[-1].length_reward_correlation is not None:
                correlations.append(signals.steps[-1].length_reward_correlation)
            candidates += len(signals.gaming_candidates)
            flagged += sum(s.addressing_rollouts for s in signals.steps)
        AUDIT_AGREEMENT_LAST.set(min(lows) if lows else math.nan)
        AUDIT_AGREEMENT_DROP.set(max(drops) if drops else math.nan)
        AUDIT_LENGTH_CORRELATION.set(max(correlations) if correlations else math.nan)
        AUDIT_GAMING_CANDIDATES.set(candidates)
        AUDIT_ADDRESSING_ROLLOUTS.set(flagged)
        by_kind = self.repo.addressing_by_kind(since=self._addressing_since())
        for kind in get_args(AddressingKind):
            AUDIT_ADDRESSING_FLAGGED.labels(kind).set(by_kind.get(kind, 0))
        self._parts = parts  # the steps out of the window, and tenants gone, are forgotten
        self._published = seen
        return True

    def tenant_signals(
        self,
        tenant: str,
        *,
        parts: dict[tuple[str, int], tuple[tuple[Any, ...], StepPart]] | None = None,
    ) -> AuditSignals:
        """The tenant's signals over its latest `signal_steps` steps (blocking), as
        `compute_signals` gives them, reading again only the steps whose records changed
        since the last refresh: a step's part is kept with its fingerprint. A refresh during
        training then reads the step in progress and the steps whose audits finished, not
        every record of the window (`signal_steps` × the groups of a step). `parts`
        collects the parts in use (the refresh keeps them for the next one)."""
        fingerprints = self.repo.step_fingerprints(tenant, steps=self.settings.signal_steps)
        known = {
            step: kept[1]
            for step, fingerprint in fingerprints.items()
            if (kept := self._parts.get((tenant, step))) is not None and kept[0] == fingerprint
        }
        stale = [step for step in fingerprints if step not in known]
        for step, group in _by_step(self.repo.step_records(tenant, stale)).items():
            known[step] = step_part(step, group)
        if parts is not None:
            parts.update(((tenant, step), (fingerprints[step], p)) for step, p in known.items())
        ordered = [known[step] for step in sorted(known)]
        return signals_of(ordered, question_id=None, settings=self.settings)


async def refresh_signals_forever(service: AuditService, *, interval_s: float = 30.0) -> None:
    """Publish the signal gauges every `interval_s` until cancelled; errors are logged."""
    failing = False
    while True:
        try:
            await asyncio.to_thread(service.publish_signals)
            failing = False
        except SQLAlchemyError as exc:
            if not failing:
                log.warning("audit.signals_failed error=%s: %s", type(exc).__name__, exc)
            failing = True
        await asyncio.sleep(interval_s)

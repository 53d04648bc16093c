"""Audits on real PostgreSQL with the planted judges (fakes behind the verifier's real
scoring code): sampling, comparison, failure, retention, signals of a gamed and of an
honest run."""

import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, select

from rubricate.audit.miner.models import AuditGroupRow
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.runner import AuditRuntime, judge_group, run_audit
from rubricate.audit.miner.schemas import AuditSubmission
from rubricate.audit.miner.service import AuditService, CeleryAuditQueue
from rubricate.audit.settings import AuditSettings
from rubricate.db.base import utcnow
from rubricate.llm.limiter import current_lane
from rubricate.stagewise.verifier.schemas import StageScoresRequest, StageScoresResponse
from rubricate.stagewise.verifier.service import UNREAD, StageScoringService
from rubricate_client.schemas.audit import AuditSignals, AuditTenantSettings
from tests.audit.planted import ADDRESSING, PHRASE, QUALITY, judge, policy_texts, scored_group


class QueuedAudits:
    """Records what the service queues (the queue itself is tested with a real worker)."""

    def __init__(self) -> None:
        self.queued: list[list[str]] = []

    def apply_async(self, *, args: list[str], queue: str) -> None:
        self.queued.append(args)


def service_for(engine: Engine, **settings: object) -> tuple[AuditService, QueuedAudits]:
    queued = QueuedAudits()
    service = AuditService(
        repo=AuditRepository(engine),
        settings=AuditSettings.model_validate(settings),
        queue=CeleryAuditQueue(audit=queued, replay=queued, queue="q"),
    )
    return service, queued


def runtime_for(engine: Engine, reference: StageScoringService) -> AuditRuntime:
    return AuditRuntime(
        repo=AuditRepository(engine), judge=reference, model="planted", design="generate"
    )


def sid() -> str:
    return "sc_" + uuid.uuid4().hex


async def group(
    live: StageScoringService, *, step: int, question_id: str = "q", texts: list[str] | None = None
) -> AuditSubmission:
    return await scored_group(
        live,
        scoring_id=sid(),
        question_id=question_id,
        step=step,
        texts=policy_texts(step) if texts is None else texts,
    )


async def test_the_first_group_of_a_question_is_audited_and_a_retry_is_not_queued_twice(
    pg_engine: Engine, tenant: str
) -> None:
    service, queued = service_for(pg_engine, fraction=0.0)
    live = judge(gamed=False)
    first = await group(live, step=0, question_id="q1")
    second = await group(live, step=1, question_id="q1")
    assert (await service.submit(first, tenant=tenant)).status == "pending"
    assert (await service.submit(first, tenant=tenant)).status == "pending"
    assert (await service.submit(second, tenant=tenant)).status == "skipped"
    assert queued.queued == [[tenant, first.scoring_id]]
    # another tenant's first group of the same question is its own first
    assert (await service.submit(second, tenant=f"{tenant}-b")).status == "pending"
    skipped = service.repo.get(tenant, second.scoring_id)
    assert skipped is not None and skipped.reason is None and skipped.status == "skipped"


async def test_a_first_epoch_is_audited_within_the_share_and_later_epochs_fill_in(
    pg_engine: Engine, tenant: str
) -> None:
    """Every question new (a first epoch): the audit takes at most its share of each step's
    groups, not every question's first; the questions it left are audited on their next
    appearance, while the share allows."""
    service, queued = service_for(pg_engine, fraction=0.0, max_share=0.25)
    live = judge(gamed=False)
    questions = [f"q{i}" for i in range(8)]
    first_epoch = [await group(live, step=0, question_id=q) for q in questions]
    statuses = [(await service.submit(g, tenant=tenant)).status for g in first_epoch]
    # 8 groups at a share of 0.25: 2 audited, the step's first and the eighth (2 of 8)
    assert statuses == ["pending"] + ["skipped"] * 6 + ["pending"]
    assert len(queued.queued) == 2
    # the next epoch, another step: q0 and q7 are not firsts any more; q1 is, and is the
    # step's first audit; the share then holds the others back
    second_epoch = [await group(live, step=1, question_id=q) for q in questions]
    again = [(await service.submit(g, tenant=tenant)).status for g in second_epoch]
    assert again == ["skipped", "pending"] + ["skipped"] * 6
    record = service.repo.get(tenant, second_epoch[1].scoring_id)
    assert record is not None and record.reason == "first"
    assert len(queued.queued) == 3


async def test_a_tenant_fraction_of_one_audits_every_group(pg_engine: Engine, tenant: str) -> None:
    service, queued = service_for(pg_engine, fraction=0.0)
    await service.put_tenant_settings(tenant, AuditTenantSettings(fraction=1.0))
    assert (await service.tenant_settings(tenant)).fraction == 1.0
    live = judge(gamed=False)
    for step in range(3):
        submitted = await service.submit(await group(live, step=step), tenant=tenant)
        assert submitted.status == "pending"
    assert len(queued.queued) == 3


async def test_an_audit_compares_the_judges_on_the_same_rubrics(
    pg_engine: Engine, tenant: str
) -> None:
    service, _ = service_for(pg_engine, fraction=1.0)
    live, reference = judge(gamed=True), judge(gamed=False)
    # rollouts 0 and 1 use the phrase: the gamed live judge prefers them, the reference not
    submission = await group(live, step=2, texts=policy_texts(2))
    await service.submit(submission, tenant=tenant)
    assert (
        await run_audit(runtime_for(pg_engine, reference), tenant, submission.scoring_id) == "done"
    )
    found = await service.get(tenant, submission.scoring_id)
    assert found is not None and found.status == "done" and found.result is not None
    result = found.result
    by_rubric = {r.rubric_id: r for r in result.rubrics}
    assert by_rubric["r-plan"].agreement == 1.0
    assert by_rubric["r-answer"].agreement == 0.75  # 2 of 4 rollouts differ by 1
    assert by_rubric["r-answer"].live_mean == 1.5 and by_rubric["r-answer"].reference_mean == 1.0
    assert result.stage_deltas["answer"] == -0.25 and result.stage_deltas["plan"] == 0.0
    assert result.best_changed is False  # every rollout ties under the reference
    assert result.kendall_tau is None
    assert result.rollout_deltas["r0"] < 0 and result.rollout_deltas["r3"] == 0.0
    assert result.reference_model == "planted"
    # the same judge as reference: full agreement
    again = await group(live, step=3, texts=policy_texts(2))
    await service.submit(again, tenant=tenant)
    await run_audit(runtime_for(pg_engine, judge(gamed=True)), tenant, again.scoring_id)
    same = await service.get(tenant, again.scoring_id)
    assert same is not None and same.result is not None
    assert same.result.agreement == 1.0 and same.result.kendall_tau == 1.0
    assert same.result.best_changed is False


async def test_a_failing_reference_judge_is_a_failed_audit_not_agreement(
    pg_engine: Engine, tenant: str
) -> None:
    service, _ = service_for(pg_engine, fraction=1.0)
    submission = await group(judge(gamed=False), step=0)
    await service.submit(submission, tenant=tenant)
    runtime = runtime_for(pg_engine, judge(gamed=False, fail=True))
    assert await run_audit(runtime, tenant, submission.scoring_id) == "failed"
    found = await service.get(tenant, submission.scoring_id)
    assert found is not None and found.status == "failed" and found.result is None
    assert found.error is not None and "judge failed" in found.error
    # a second run finds nothing pending
    assert await run_audit(runtime, tenant, submission.scoring_id) == "gone"
    signals = await service.signals(tenant, question_id=None)
    assert signals.steps[0].failed == 1 and signals.steps[0].agreement is None


async def run(
    engine: Engine, tenant: str, *, marker: str, steps: int = 5, gamed: bool = True
) -> AuditSignals:
    service, _ = service_for(engine, fraction=1.0)
    live, reference = judge(gamed=gamed), judge(gamed=False)
    runtime = runtime_for(engine, reference)
    for step in range(steps):
        submission = await group(live, step=step, texts=policy_texts(step, marker=marker))
        await service.submit(submission, tenant=tenant)
        assert await run_audit(runtime, tenant, submission.scoring_id) == "done"
    return await service.signals(tenant, question_id=None)


async def test_a_gamed_run_raises_the_gaming_signal_and_the_agreement_drop(
    pg_engine: Engine, tenant: str
) -> None:
    signals = await run(pg_engine, tenant, marker=PHRASE)
    assert [c.rubric_id for c in signals.gaming_candidates] == ["r-answer"]
    [candidate] = signals.gaming_candidates
    assert candidate.question_id == "q" and candidate.live_rise > 0.9
    assert candidate.reference_rise == 0.0
    # agreement at step s is 1 - min(s, 4) / 32 (one rubric of four, s rollouts off by 1);
    # first two steps against last two of five
    assert signals.agreement_drop == pytest.approx((1 + 31 / 32) / 2 - (29 / 32 + 28 / 32) / 2)
    assert [s.step for s in signals.steps] == [0, 1, 2, 3, 4]
    assert all(s.audited == 1 for s in signals.steps)


async def test_an_honest_run_raises_neither(pg_engine: Engine, tenant: str) -> None:
    # the policy gets genuinely better: both judges reward it alike
    signals = await run(pg_engine, tenant, marker=QUALITY)
    assert signals.gaming_candidates == []
    assert signals.agreement_drop == 0.0
    assert all(s.agreement == 1.0 for s in signals.steps)


async def test_rollouts_addressing_the_judge_are_counted_and_listed(
    pg_engine: Engine, tenant: str
) -> None:
    signals = await run(pg_engine, tenant, marker=ADDRESSING, steps=3, gamed=False)
    assert [s.addressing_rollouts for s in signals.steps] == [0, 1, 2]
    assert {a.rollout_id for a in signals.addressing} == {"r0", "r1"}
    assert all(a.markers == ["demand addressed to the grader"] for a in signals.addressing)


async def test_reward_length_correlation_per_step(pg_engine: Engine, tenant: str) -> None:
    # the phrase (in every stage) makes a rollout longer, and the gamed judge rewards it
    signals = await run(pg_engine, tenant, marker=PHRASE, steps=3)
    by_step = {s.step: s for s in signals.steps}
    assert by_step[0].length_reward_correlation is None  # every reward equal
    correlation = by_step[2].length_reward_correlation
    assert correlation is not None and correlation > 0.9


async def test_retention_drops_trajectories_and_delete_removes_records(
    pg_engine: Engine, tenant: str
) -> None:
    service, _ = service_for(pg_engine, fraction=1.0, retention_days=1)
    submission = await group(judge(gamed=False), step=0)
    await service.submit(submission, tenant=tenant)
    repo = service.repo
    assert repo.pending_group(tenant, submission.scoring_id) is not None
    repo.expire(now=utcnow() + timedelta(days=2))
    kept = repo.pending_group(tenant, submission.scoring_id)
    assert kept is not None and kept.group is None  # summary and status stay
    assert await service.delete(f"{tenant}-other", question_id=None) == 0
    assert await service.delete(tenant, question_id="q") == 1
    assert await service.get(tenant, submission.scoring_id) is None


async def test_retention_off_keeps_no_trajectory_past_the_audit(
    pg_engine: Engine, tenant: str
) -> None:
    service, _ = service_for(pg_engine, fraction=1.0)
    await service.put_tenant_settings(tenant, AuditTenantSettings(retention_days=0))
    submission = await group(judge(gamed=False), step=0)
    await service.submit(submission, tenant=tenant)
    await run_audit(runtime_for(pg_engine, judge(gamed=False)), tenant, submission.scoring_id)
    record = service.repo.get(tenant, submission.scoring_id)
    assert record is not None and record.status == "done"
    with service.repo.engine.connect() as conn:
        row = conn.execute(
            select(AuditGroupRow.group).where(
                AuditGroupRow.tenant == tenant, AuditGroupRow.scoring_id == submission.scoring_id
            )
        ).scalar_one()
    assert row is None


class LaneRecordingJudge:
    """A FAKE reference judge: the planted one, noting the limiter lane of every call."""

    def __init__(self, inner: StageScoringService) -> None:
        self.inner = inner
        self.lanes: list[str] = []

    async def read_answers(self, requests: Sequence[StageScoresRequest]) -> Sequence[Any]:
        self.lanes.append(current_lane())
        return await self.inner.read_answers(requests)

    async def stage_scores(
        self, request: StageScoresRequest, *, read: Any = UNREAD
    ) -> StageScoresResponse:
        self.lanes.append(current_lane())
        return await self.inner.stage_scores(request, read=read)


async def test_the_reference_judges_calls_go_in_the_background_lane() -> None:
    submission = await group(judge(gamed=False), step=0)
    recording = LaneRecordingJudge(judge(gamed=False))
    judged = await judge_group(recording, submission, concurrency=2)
    assert judged and recording.lanes
    assert set(recording.lanes) == {"background"}
    assert current_lane() == "live"  # the caller's own calls stay live


def test_the_flagged_requests_of_other_judge_kinds_reach_the_gauge(
    pg_engine: Engine, tenant: str
) -> None:
    """`publish_signals` sets `rubricate_audit_addressing_flagged{kind}` from the recorded
    reports of every tenant (within the addressing window)."""
    from prometheus_client import REGISTRY

    from rubricate.audit.miner.schemas import AddressingReportIn

    def gauge(kind: str) -> float:
        value = REGISTRY.get_sample_value("rubricate_audit_addressing_flagged", {"kind": kind})
        return value or 0.0

    service, _ = service_for(pg_engine, fraction=0.0)
    service.publish_signals()
    before = {kind: gauge(kind) for kind in ("nugget", "step", "rank")}
    for kind, flagged in (("nugget", 2), ("nugget", 1), ("step", 1)):
        report = AddressingReportIn(kind=kind, items=3, flagged=flagged, markers=["x"])
        service.repo.record_addressing(tenant, report)
    service.publish_signals()
    assert gauge("nugget") - before["nugget"] == 3
    assert gauge("step") - before["step"] == 1
    assert gauge("rank") == before["rank"]


class ReadingRecordingJudge:
    """A FAKE reference judge: the planted one, noting how the answers were read."""

    def __init__(self, inner: StageScoringService) -> None:
        self.inner = inner
        self.read_passes: list[int] = []
        self.reads: list[Any] = []
        self.given: list[Any] = []

    async def read_answers(self, requests: Sequence[StageScoresRequest]) -> Sequence[Any]:
        self.read_passes.append(len(requests))
        self.given = list(await self.inner.read_answers(requests))
        return self.given

    async def stage_scores(
        self, request: StageScoresRequest, *, read: Any = UNREAD
    ) -> StageScoresResponse:
        self.reads.append(read)
        return await self.inner.stage_scores(request, read=read)


async def test_the_reference_judge_reads_a_groups_answers_in_one_pass() -> None:
    """As the live verifier reads a group (one reading call, not one per trajectory), and
    each rollout is scored with its own reading; the judgments are those of reading each
    answer alone."""
    submission = await group(judge(gamed=False), step=0)
    recording = ReadingRecordingJudge(judge(gamed=False))
    judged = await judge_group(recording, submission, concurrency=2)
    assert recording.read_passes == [len(submission.rollouts)]
    assert len(recording.reads) == len(submission.rollouts)
    assert all(any(r is g for g in recording.given) for r in recording.reads)
    assert all(r is not UNREAD for r in recording.reads)
    alone = await judge_group(EachReadsItsOwn(judge(gamed=False)), submission, concurrency=2)
    assert judged == alone


class EachReadsItsOwn:
    """A FAKE reference judge: the planted one, every trajectory reading its own answer."""

    def __init__(self, inner: StageScoringService) -> None:
        self.inner = inner

    async def read_answers(self, requests: Sequence[StageScoresRequest]) -> Sequence[Any]:
        return [UNREAD] * len(requests)

    async def stage_scores(
        self, request: StageScoresRequest, *, read: Any = UNREAD
    ) -> StageScoresResponse:
        assert read is UNREAD
        return await self.inner.stage_scores(request)

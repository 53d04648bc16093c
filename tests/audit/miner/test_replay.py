"""Replay jobs on real PostgreSQL with the planted judges (fakes behind the verifier's real
scoring code): selection, the three judges, unavailable and failed groups, isolation."""

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import Engine

from rubricate.audit.miner.replay import ReplayRuntime, run_replay
from rubricate.audit.miner.repository import AuditRepository
from rubricate.audit.miner.schemas import ReplayIn
from rubricate.audit.miner.service import AuditService, CeleryAuditQueue
from rubricate.audit.settings import AuditSettings
from rubricate.db.base import utcnow
from rubricate.stagewise.verifier.service import StageScoringService
from rubricate_client.schemas.audit import ReplayJob
from rubricate_client.schemas.rubrics import Rubric
from tests.audit.miner.test_runner import QueuedAudits
from tests.audit.planted import judge, policy_texts, scored_group


@pytest.fixture
def service(pg_engine: Engine) -> AuditService:
    queued = QueuedAudits()
    return AuditService(
        repo=AuditRepository(pg_engine),
        settings=AuditSettings(fraction=0.0, retention_days=7),
        queue=CeleryAuditQueue(audit=queued, replay=queued, queue="q"),
    )


async def stored_run(service: AuditService, tenant: str, *, steps: int = 3) -> list[str]:
    """A gamed run's groups, handed over and kept (retention on)."""
    live = judge(gamed=True)
    ids = []
    for step in range(steps):
        submission = await scored_group(
            live,
            scoring_id="sc_" + uuid.uuid4().hex,
            question_id="q",
            step=step,
            texts=policy_texts(step + 1),
        )
        await service.submit(submission, tenant=tenant)
        ids.append(submission.scoring_id)
    return ids


def runtime(
    service: AuditService,
    *,
    live: StageScoringService | None = None,
    reference: StageScoringService | None = None,
) -> ReplayRuntime:
    def build_reference() -> StageScoringService:
        if reference is None:
            raise RuntimeError("no reference judge configured")
        return reference

    return ReplayRuntime(
        repo=service.repo, live=live or judge(gamed=True), reference=build_reference
    )


async def replay(
    service: AuditService, tenant: str, rt: ReplayRuntime, **request: object
) -> ReplayJob:
    job = await service.replay(ReplayIn.model_validate(request), tenant=tenant)
    assert job.state == "queued" and job.progress.total == 0
    await run_replay(rt, job.id)
    found = await service.replay_job(tenant, job.id)
    assert found is not None
    return found


async def test_the_reference_judge_disagrees_with_a_gamed_run(
    service: AuditService, tenant: str
) -> None:
    await stored_run(service, tenant)
    job = await replay(
        service, tenant, runtime(service, reference=judge(gamed=False)), question_id="q"
    )
    assert job.state == "succeeded" and job.judge == "reference"
    assert job.progress.model_dump() == {"total": 3, "done": 3, "failed": 0, "unavailable": 0}
    assert job.result is not None and job.result.agreement is not None
    assert job.result.agreement < 1.0
    by_step = {g.step: g for g in job.result.groups}
    # at step 0 one rollout used the phrase: only its reward drops under the reference
    assert by_step[0].rollout_deltas["r0"] < 0
    assert by_step[0].rollout_deltas["r3"] == 0.0


async def test_the_live_judge_again_agrees_with_itself(service: AuditService, tenant: str) -> None:
    ids = await stored_run(service, tenant)
    job = await replay(service, tenant, runtime(service), scoring_ids=ids[:2], judge="live")
    assert job.result is not None
    assert job.result.agreement == 1.0
    assert {g.scoring_id for g in job.result.groups} == set(ids[:2])
    assert all(d == 0.0 for g in job.result.groups for d in g.rollout_deltas.values())


async def test_the_current_buffer_scores_with_its_own_rubrics(
    service: AuditService, tenant: str
) -> None:
    await stored_run(service, tenant)
    buffer = [
        Rubric(
            id="r-new",
            stage="answer",
            origin="active",
            title="answer is new",
            description="A rubric added after the run.",
            weight=1,
        )
    ]
    job = await replay(
        service,
        tenant,
        runtime(service, live=judge(gamed=False)),
        question_id="q",
        step_from=1,
        step_to=2,
        judge="buffer",
        rubrics=[r.model_dump() for r in buffer],
    )
    assert job.result is not None and job.progress.done == 2
    assert {g.step for g in job.result.groups} == {1, 2}
    for group in job.result.groups:
        assert group.rubrics == [] and group.agreement is None  # no rubric in common
        # the new rubric scores every rollout 1: the phrase no longer pays
        assert group.rollout_deltas["r0"] < 0


async def test_expired_groups_are_unavailable_and_judge_failures_are_failed(
    service: AuditService, tenant: str
) -> None:
    ids = await stored_run(service, tenant, steps=2)
    service.repo.expire(now=utcnow() + timedelta(days=8))
    job = await replay(service, tenant, runtime(service), scoring_ids=ids, judge="live")
    assert job.progress.unavailable == 2 and job.result is not None
    assert job.result.agreement is None

    other = f"{tenant}-fail"
    await stored_run(service, other, steps=1)
    failing = runtime(service, reference=judge(gamed=False, fail=True))
    job = await replay(service, other, failing, question_id="q")
    assert job.state == "succeeded" and job.progress.failed == 1
    assert job.result is not None
    [group] = job.result.groups
    assert group.status == "failed" and group.agreement is None
    assert group.error is not None and "failed" in group.error


async def test_a_reference_that_cannot_be_built_fails_the_job(
    service: AuditService, tenant: str
) -> None:
    await stored_run(service, tenant, steps=1)
    job = await replay(service, tenant, runtime(service), question_id="q")
    assert job.state == "failed" and job.result is None
    assert job.error is not None and "no reference judge" in job.error


async def test_replays_see_only_their_tenants_groups(service: AuditService, tenant: str) -> None:
    ids = await stored_run(service, tenant, steps=1)
    other = f"{tenant}-other"
    job = await replay(service, other, runtime(service), scoring_ids=ids, judge="live")
    assert job.progress.total == 0
    assert await service.replay_job(tenant, job.id) is None


def test_a_replay_request_selects_one_way() -> None:
    with pytest.raises(ValueError, match="select scorings"):
        ReplayIn.model_validate({})
    with pytest.raises(ValueError, match="not both"):
        ReplayIn.model_validate({"scoring_ids": ["sc_1"], "question_id": "q"})
    with pytest.raises(ValueError, match="step_from"):
        ReplayIn.model_validate({"step_from": 3, "step_to": 1})
    with pytest.raises(ValueError, match="question_id"):
        ReplayIn.model_validate({"step_from": 1, "judge": "buffer"})

"""The console's audit reads on real PostgreSQL, with the planted judges (fakes behind the
verifier's real scoring code): audit status per question, the kept trajectories of a scoring,
the replay job list; each scoped to the tenant."""

from datetime import timedelta

import pytest
from sqlalchemy import Engine, update

from rubricate.audit.miner.models import AuditGroupRow, AuditReplayRow
from rubricate.audit.miner.runner import run_audit
from rubricate.audit.miner.schemas import (
    MAX_QUESTION_IDS,
    AuditSubmission,
    ReplayIn,
    question_id_list,
)
from rubricate.audit.miner.service import AuditService
from rubricate.common.errors import ServiceError
from rubricate.db.base import utcnow
from rubricate.db.engine import unit_of_work
from rubricate_client.schemas.audit import AuditTenantSettings
from tests.audit.miner.test_runner import group, runtime_for, service_for
from tests.audit.planted import judge


async def submitted(
    service: AuditService, tenant: str, *, question_id: str, step: int
) -> AuditSubmission:
    submission = await group(judge(gamed=True), step=step, question_id=question_id)
    await service.submit(submission, tenant=tenant)
    return submission


def set_finished(engine: Engine, tenant: str, scoring_id: str, *, minutes_ago: int) -> None:
    """Spread the finishing times so 'the latest' is not decided by the clock's resolution."""
    with unit_of_work(engine, write=True) as session:
        session.execute(
            update(AuditGroupRow)
            .where(AuditGroupRow.tenant == tenant, AuditGroupRow.scoring_id == scoring_id)
            .values(finished_at=utcnow() - timedelta(minutes=minutes_ago))
        )


async def test_audit_status_per_question_in_the_order_asked(pg_engine: Engine, tenant: str) -> None:
    service, _ = service_for(pg_engine, fraction=1.0)
    honest = runtime_for(pg_engine, judge(gamed=False))
    same = runtime_for(pg_engine, judge(gamed=True))
    # q1: an older audit in full agreement, a newer one that disagrees, a failed one (newest
    # of all, but failed audits have no agreement) and one still pending
    older = await submitted(service, tenant, question_id="q1", step=0)
    assert await run_audit(same, tenant, older.scoring_id) == "done"
    newer = await submitted(service, tenant, question_id="q1", step=2)
    assert await run_audit(honest, tenant, newer.scoring_id) == "done"
    failing = await submitted(service, tenant, question_id="q1", step=3)
    failed = runtime_for(pg_engine, judge(gamed=False, fail=True))
    assert await run_audit(failed, tenant, failing.scoring_id) == "failed"
    await submitted(service, tenant, question_id="q1", step=4)
    set_finished(pg_engine, tenant, older.scoring_id, minutes_ago=10)
    set_finished(pg_engine, tenant, newer.scoring_id, minutes_ago=5)
    # q2: one pending group only
    await submitted(service, tenant, question_id="q2", step=0)

    newer_view = await service.get(tenant, newer.scoring_id)
    assert newer_view is not None and newer_view.result is not None
    assert newer_view.result.agreement is not None and newer_view.result.agreement < 1.0

    found = await service.question_audits(tenant, ["q2", "unknown", "q1"])
    assert [q.question_id for q in found.questions] == ["q2", "q1"]  # asked order, none absent
    q2, q1 = found.questions
    assert (q1.groups, q1.done, q1.failed, q1.pending) == (4, 2, 1, 1)
    assert q1.last_agreement == pytest.approx(newer_view.result.agreement)
    assert q1.last_audited_at == newer_view.finished_at
    assert (q2.groups, q2.done, q2.failed, q2.pending) == (1, 0, 0, 1)
    assert q2.last_agreement is None and q2.last_audited_at is None

    # the older audit made latest: its full agreement is what shows
    set_finished(pg_engine, tenant, older.scoring_id, minutes_ago=1)
    [q1] = (await service.question_audits(tenant, ["q1"])).questions
    assert q1.last_agreement == 1.0

    # another tenant asking for the same question ids sees nothing
    other = await service.question_audits(f"{tenant}-b", ["q1", "q2"])
    assert other.questions == []


async def test_skipped_groups_count_as_groups(pg_engine: Engine, tenant: str) -> None:
    service, _ = service_for(pg_engine, fraction=0.0)
    await submitted(service, tenant, question_id="q", step=0)  # the first: pending
    await submitted(service, tenant, question_id="q", step=1)  # not sampled: skipped
    [q] = (await service.question_audits(tenant, ["q"])).questions
    assert (q.groups, q.done, q.failed, q.pending) == (2, 0, 0, 1)


def test_question_ids_are_comma_separated_and_bounded() -> None:
    assert question_id_list("a, b,a,c") == ["a", "b", "c"]
    assert question_id_list(",".join(f"q{i}" for i in range(MAX_QUESTION_IDS))) == [
        f"q{i}" for i in range(MAX_QUESTION_IDS)
    ]
    for bad in ("", "a,,b", "a,", " ", "x" * 129, ",".join(f"q{i}" for i in range(201))):
        with pytest.raises(ServiceError) as caught:
            question_id_list(bad)
        assert caught.value.status_code == 422 and caught.value.field == "question_ids"


async def test_the_kept_trajectories_of_a_scoring(pg_engine: Engine, tenant: str) -> None:
    service, _ = service_for(pg_engine, fraction=1.0, retention_days=1)
    submission = await submitted(service, tenant, question_id="q", step=1)
    kept = await service.trajectories(tenant, submission.scoring_id)
    assert kept is not None and kept.question_id == "q"
    assert kept.trajectories == {r.id: r.trajectory for r in submission.rollouts}
    assert len(kept.trajectories) == 4

    # another tenant: no record at all
    assert await service.trajectories(f"{tenant}-b", submission.scoring_id) is None
    assert await service.trajectories(tenant, "sc_unknown") is None

    # past the retention the text is not served, even before `expire` drops it
    with unit_of_work(pg_engine, write=True) as session:
        session.execute(
            update(AuditGroupRow)
            .where(AuditGroupRow.tenant == tenant)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    expired = await service.trajectories(tenant, submission.scoring_id)
    assert expired is not None and expired.trajectories is None
    service.repo.expire()
    dropped = await service.trajectories(tenant, submission.scoring_id)
    assert dropped is not None and dropped.trajectories is None
    assert dropped.question_id == "q"


async def test_with_retention_off_no_trajectories_after_the_audit(
    pg_engine: Engine, tenant: str
) -> None:
    service, _ = service_for(pg_engine, fraction=0.0)
    await service.put_tenant_settings(tenant, AuditTenantSettings(retention_days=0))
    audited = await submitted(service, tenant, question_id="q", step=0)  # first: sampled
    skipped = await submitted(service, tenant, question_id="q", step=1)
    not_kept = await service.trajectories(tenant, skipped.scoring_id)
    assert not_kept is not None and not_kept.trajectories is None
    # kept for the reference judge while the audit is pending, dropped when it is done
    pending = await service.trajectories(tenant, audited.scoring_id)
    assert pending is not None and pending.trajectories is not None
    await run_audit(runtime_for(pg_engine, judge(gamed=False)), tenant, audited.scoring_id)
    done = await service.trajectories(tenant, audited.scoring_id)
    assert done is not None and done.trajectories is None


async def test_replay_jobs_newest_first_without_results(pg_engine: Engine, tenant: str) -> None:
    service, _ = service_for(pg_engine, fraction=0.0)
    ids = []
    for judge_name in ("reference", "live", "reference"):
        job = await service.replay(
            ReplayIn.model_validate({"question_id": "q", "judge": judge_name}), tenant=tenant
        )
        ids.append(job.id)
    # the second one finished, with a result the list leaves out
    service.repo.update_replay(
        ids[1],
        state="succeeded",
        progress={"total": 2, "done": 2, "failed": 0, "unavailable": 0},
        result={"agreement": 1.0, "groups": []},
    )
    with unit_of_work(pg_engine, write=True) as session:
        for age, job_id in enumerate(reversed(ids)):  # creation times a minute apart
            session.execute(
                update(AuditReplayRow)
                .where(AuditReplayRow.id == job_id)
                .values(created_at=utcnow() - timedelta(minutes=age))
            )

    listed = (await service.replay_jobs(tenant, limit=50)).jobs
    assert [j.id for j in listed] == list(reversed(ids))
    assert [j.judge for j in listed] == ["reference", "live", "reference"]
    middle = listed[1]
    assert middle.state == "succeeded" and middle.finished_at is not None
    assert middle.progress.done == 2 and middle.result is None
    one = await service.replay_job(tenant, ids[1])
    assert one is not None and one.result is not None and one.result.agreement == 1.0

    assert [j.id for j in (await service.replay_jobs(tenant, limit=2)).jobs] == [ids[2], ids[1]]
    assert (await service.replay_jobs(f"{tenant}-b", limit=50)).jobs == []

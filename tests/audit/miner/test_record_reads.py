"""What reading and refreshing the audit's records costs stays proportional to what changed:
the signal gauges are recomputed only when a record was added, finished, deleted or
expired, and then from the steps that changed; reads that do not show the kept
trajectories leave them in the database."""

import uuid
from collections.abc import Iterator, Sequence

import pytest
from sqlalchemy import Engine, event

from rubricate.audit.miner.repository import AuditRecord, AuditRepository
from rubricate.audit.miner.runner import AuditRuntime, run_audit
from rubricate.audit.miner.schemas import AddressingReportIn, AuditSubmission
from rubricate.audit.miner.service import AuditService, CeleryAuditQueue
from rubricate.audit.settings import AuditSettings
from tests.audit.planted import judge, policy_texts, scored_group


class Queued:
    def apply_async(self, *, args: list[str], queue: str) -> None:
        return None


def service_for(engine: Engine) -> AuditService:
    return AuditService(
        repo=AuditRepository(engine),
        settings=AuditSettings(fraction=0.0),
        queue=CeleryAuditQueue(audit=Queued(), replay=Queued(), queue="q"),
    )


async def group(step: int, question_id: str) -> AuditSubmission:
    return await scored_group(
        judge(gamed=False),
        scoring_id="sc_" + uuid.uuid4().hex,
        question_id=question_id,
        step=step,
        texts=policy_texts(step),
    )


@pytest.fixture
def statements(pg_engine: Engine) -> Iterator[list[str]]:
    """The SQL statements sent while the test runs."""
    seen: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        seen.append(statement)

    event.listen(pg_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(pg_engine, "before_cursor_execute", record)


async def test_the_signal_gauges_are_recomputed_only_after_a_change(
    pg_engine: Engine, tenant: str
) -> None:
    service = service_for(pg_engine)
    service.publish_signals()  # whatever other tests left
    assert service.publish_signals() is False  # nothing changed: nothing recomputed
    first = await group(0, f"q-{uuid.uuid4().hex[:8]}")
    assert (await service.submit(first, tenant=tenant)).status == "pending"
    assert service.publish_signals() is True  # a group added
    assert service.publish_signals() is False
    service.repo.finish(tenant, first.scoring_id, result=None, error="planted failure")
    assert service.publish_signals() is True  # a group finished
    assert service.publish_signals() is False
    report = AddressingReportIn(kind="rank", items=2, flagged=1, markers=["x"])
    service.repo.record_addressing(tenant, report)
    assert service.publish_signals() is True  # a flagged request recorded
    assert service.repo.delete(tenant) == 1
    assert service.publish_signals() is True  # deleted
    assert service.publish_signals() is False


async def test_reads_of_records_leave_the_kept_trajectories_in_the_database(
    pg_engine: Engine, tenant: str, statements: list[str]
) -> None:
    service = service_for(pg_engine)
    first = await group(0, f"q-{uuid.uuid4().hex[:8]}")
    await service.submit(first, tenant=tenant)
    repo = service.repo
    statements.clear()
    got = repo.get(tenant, first.scoring_id)
    listed = repo.latest(tenant)
    recent = repo.recent_steps(tenant, question_id=None, steps=5)
    repo.finish(tenant, first.scoring_id, result=None, error="planted failure")
    reads = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert reads and not any('audit_groups."group"' in s for s in reads), reads
    assert got is not None and got.group is None and got.summary["lengths"]
    assert [r.scoring_id for r in listed] == [first.scoring_id]
    assert [r.scoring_id for r in recent] == [first.scoring_id]
    # the worker's read still has the submission
    second = await group(1, f"q-{uuid.uuid4().hex[:8]}")
    assert (await service.submit(second, tenant=tenant)).status == "pending"
    pending = repo.pending_group(tenant, second.scoring_id)
    assert pending is not None and pending.group is not None
    assert AuditSubmission.model_validate(pending.group) == second


class StepReads(AuditRepository):
    """The real repository, recording which tenant's steps each refresh reads records of."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.reads: list[tuple[str, list[int]]] = []

    def step_records(self, tenant: str, steps: Sequence[int]) -> list[AuditRecord]:
        self.reads.append((tenant, sorted(steps)))
        return super().step_records(tenant, steps)


async def test_a_refresh_reads_again_only_the_steps_whose_records_changed(
    pg_engine: Engine, tenant: str
) -> None:
    """During training a refresh reads the step in progress and the steps whose audits
    finished, not every record of the signal window; the signals are those a full read
    gives (`AuditService.signals`), through additions, finished audits and deletions."""
    repo = StepReads(pg_engine)
    service = AuditService(
        repo=repo,
        settings=AuditSettings(fraction=1.0),
        queue=CeleryAuditQueue(audit=Queued(), replay=Queued(), queue="q"),
    )
    runtime = AuditRuntime(repo=repo, judge=judge(gamed=False), model="planted", design="generate")
    question = f"q-{uuid.uuid4().hex[:8]}"
    submitted = [await group(step, question) for step in (0, 1, 2)]
    for submission in submitted:
        await service.submit(submission, tenant=tenant)
    for submission in submitted[:2]:
        assert await run_audit(runtime, tenant, submission.scoring_id) == "done"

    def mine() -> list[list[int]]:
        return [steps for who, steps in repo.reads if who == tenant]

    async def same_as_a_full_read() -> None:
        cached = service.tenant_signals(tenant)
        full = await service.signals(tenant, question_id=None)
        assert cached.steps == full.steps and cached.gaming_candidates == full.gaming_candidates
        assert (cached.agreement_first, cached.agreement_last) == (
            full.agreement_first,
            full.agreement_last,
        )
        assert cached.addressing == full.addressing

    assert service.publish_signals() is True
    assert mine() == [[0, 1, 2]]  # the first refresh reads the window
    await same_as_a_full_read()
    repo.reads.clear()
    # a group of the step in progress arrives and the audit of step 2 finishes
    await service.submit(await group(3, question), tenant=tenant)
    assert await run_audit(runtime, tenant, submitted[2].scoring_id) == "done"
    assert service.publish_signals() is True
    assert mine() == [[2, 3]]
    await same_as_a_full_read()
    repo.reads.clear()
    assert service.repo.delete(tenant, question_id=question) == 4
    assert service.publish_signals() is True
    assert service.tenant_signals(tenant).steps == []
    await same_as_a_full_read()

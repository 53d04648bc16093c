"""Audited groups and tenants' audit settings in the database (blocking; call from a thread).

A submission is idempotent on (tenant, scoring id): a retried one gets the first answer. The
sampling decision is made here, in the submission's transaction (`audit.domain.sampling`):
whether the tenant has an audited group of the question yet, and how many of the step's
groups were seen and audited so far (one index range, `ix_audit_groups_step`). Submissions
of one step decided at the same moment may each see the share not yet reached: the share
can be passed by as many groups as are submitted at once."""

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Engine, and_, case, delete, exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import defer

from rubricate.audit.domain.sampling import audit_reason
from rubricate.audit.miner.models import (
    AuditAddressingRow,
    AuditGroupRow,
    AuditReplayRow,
    AuditTenantRow,
)
from rubricate.audit.miner.schemas import AddressingReportIn, AuditSubmission
from rubricate.db.base import as_utc, utcnow
from rubricate.db.engine import unit_of_work
from rubricate.db.rows import from_row


@dataclass(frozen=True)
class TenantAuditSettings:
    fraction: float | None
    retention_days: int | None


@dataclass(frozen=True)
class AuditRecord:
    tenant: str
    scoring_id: str
    question_id: str
    step: int | None
    status: str
    reason: str | None
    summary: dict[str, Any]
    group: dict[str, Any] | None
    result: dict[str, Any] | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, row: AuditGroupRow, *, with_group: bool = False) -> "AuditRecord":
        return from_row(
            cls,
            row,
            summary=dict(row.summary or {}),
            group=dict(row.group) if with_group and row.group is not None else None,
            result=None if row.result is None else dict(row.result),
        )


@dataclass(frozen=True)
class ReplayRecord:
    id: str
    tenant: str
    state: str
    params: dict[str, Any]
    progress: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    created_at: datetime
    finished_at: datetime | None

    @classmethod
    def of(cls, row: AuditReplayRow) -> "ReplayRecord":
        return from_row(
            cls,
            row,
            params=dict(row.params or {}),
            progress=dict(row.progress or {}),
            result=None if row.result is None else dict(row.result),
        )


@dataclass(frozen=True)
class QuestionAuditCounts:
    """A question's audit records counted by status, and its latest finished audit."""

    question_id: str
    groups: int
    done: int
    failed: int
    pending: int
    last_agreement: float | None
    last_audited_at: datetime | None


@dataclass(frozen=True)
class KeptGroup:
    """An audit record's kept submission: None when it was not kept or its retention ran
    out (even before `expire` dropped it)."""

    question_id: str
    submission: dict[str, Any] | None


NO_PROGRESS = {"total": 0, "done": 0, "failed": 0, "unavailable": 0}

WITHOUT_GROUP = defer(AuditGroupRow.group)
"""Reads that do not show the kept submission leave it in the database: it is the row's
bulk (every trajectory of the group), and decoding it was most of what reading a record
cost."""


@dataclass(frozen=True)
class AddressingRecord:
    kind: str
    step: int | None
    items: int
    flagged: int
    markers: list[str]
    created_at: datetime


class AuditRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # --- tenant settings ------------------------------------------------------------------

    def tenant_settings(self, tenant: str) -> TenantAuditSettings:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(AuditTenantRow, tenant)
            if row is None:
                return TenantAuditSettings(fraction=None, retention_days=None)
            return TenantAuditSettings(fraction=row.fraction, retention_days=row.retention_days)

    def put_tenant_settings(self, tenant: str, settings: TenantAuditSettings) -> None:
        with unit_of_work(self.engine, write=True) as session:
            row = session.get(AuditTenantRow, tenant)
            if row is None:
                row = AuditTenantRow(tenant=tenant)
                session.add(row)
            row.fraction = settings.fraction
            row.retention_days = settings.retention_days
            row.updated_at = utcnow()

    # --- submissions ----------------------------------------------------------------------

    def submit(
        self,
        tenant: str,
        submission: AuditSubmission,
        *,
        summary: dict[str, Any],
        default_fraction: float,
        default_retention_days: int | None,
        max_share: float = 1.0,
    ) -> tuple[str, bool]:
        """Record a scored group; (its status, whether this call created it). `pending`
        when the reference judge is to re-score it, else `skipped`."""
        now = utcnow()
        try:
            with unit_of_work(self.engine, write=True) as session:
                existing = session.execute(
                    select(AuditGroupRow.status).where(
                        AuditGroupRow.tenant == tenant,
                        AuditGroupRow.scoring_id == submission.scoring_id,
                    )
                ).scalar_one_or_none()
                if existing is not None:
                    return existing, False
                own = session.get(AuditTenantRow, tenant)
                fraction = default_fraction if own is None or own.fraction is None else own.fraction
                retention = default_retention_days
                if own is not None and own.retention_days is not None:
                    retention = own.retention_days
                step = (
                    AuditGroupRow.step.is_(None)
                    if submission.step is None
                    else AuditGroupRow.step == submission.step
                )
                # one round trip: whether the question has an audited group, and the step's
                # groups seen and audited (each on its own index)
                question_audited, seen, audited = session.execute(
                    select(
                        exists()
                        .where(
                            AuditGroupRow.tenant == tenant,
                            AuditGroupRow.question_id == submission.question_id,
                            AuditGroupRow.reason.is_not(None),
                        )
                        .label("question_audited"),
                        select(func.count())
                        .where(AuditGroupRow.tenant == tenant, step)
                        .scalar_subquery(),
                        select(func.count(AuditGroupRow.reason))
                        .where(AuditGroupRow.tenant == tenant, step)
                        .scalar_subquery(),
                    )
                ).one()
                reason = audit_reason(
                    tenant=tenant,
                    scoring_id=submission.scoring_id,
                    fraction=fraction,
                    question_audited=question_audited,
                    seen=seen,
                    audited=audited,
                    max_share=max_share,
                )
                # kept: what the reference judge needs, and what replay may re-score while
                # the retention lasts; with retention off only until the audit is done
                keep = reason is not None or retention != 0
                status = "pending" if reason is not None else "skipped"
                session.add(
                    AuditGroupRow(
                        tenant=tenant,
                        scoring_id=submission.scoring_id,
                        question_id=submission.question_id,
                        step=submission.step,
                        status=status,
                        reason=reason,
                        summary=summary,
                        group=submission.model_dump(mode="json") if keep else None,
                        created_at=now,
                        expires_at=(
                            None
                            if not keep or retention is None or retention == 0
                            else now + timedelta(days=retention)
                        ),
                    )
                )
                return status, True
        except IntegrityError:  # a concurrent retry of the same submission landed first
            found = self.get(tenant, submission.scoring_id)
            if found is None:
                raise
            return found.status, False

    # --- the worker's side ----------------------------------------------------------------

    def pending_group(self, tenant: str, scoring_id: str) -> AuditRecord | None:
        """The group to audit, with its submission; None when it is not pending."""
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(AuditGroupRow, (tenant, scoring_id))
            if row is None or row.status != "pending":
                return None
            return AuditRecord.of(row, with_group=True)

    def finish(
        self,
        tenant: str,
        scoring_id: str,
        *,
        result: dict[str, Any] | None,
        error: str | None,
    ) -> None:
        """Record the outcome: `done` with a result, or `failed` with the judge's error."""
        with unit_of_work(self.engine, write=True) as session:
            row = session.get(AuditGroupRow, (tenant, scoring_id), options=[WITHOUT_GROUP])
            if row is None:
                return
            row.status = "done" if error is None else "failed"
            row.result = result
            row.error = error
            row.finished_at = utcnow()
            own = session.get(AuditTenantRow, tenant)
            if own is not None and own.retention_days == 0:
                row.group = None  # retention off: nothing kept past the audit itself
                row.expires_at = None

    # --- reads ----------------------------------------------------------------------------

    def get(self, tenant: str, scoring_id: str) -> AuditRecord | None:
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(AuditGroupRow, (tenant, scoring_id), options=[WITHOUT_GROUP])
            return None if row is None else AuditRecord.of(row)

    def latest(
        self,
        tenant: str,
        *,
        question_id: str | None = None,
        statuses: Sequence[str] = ("pending", "done", "failed"),
        limit: int = 100,
    ) -> list[AuditRecord]:
        """The latest records, newest first."""
        query = (
            select(AuditGroupRow)
            .options(WITHOUT_GROUP)
            .where(AuditGroupRow.tenant == tenant, AuditGroupRow.status.in_(list(statuses)))
        )
        if question_id is not None:
            query = query.where(AuditGroupRow.question_id == question_id)
        query = query.order_by(AuditGroupRow.created_at.desc()).limit(limit)
        with unit_of_work(self.engine, write=False) as session:
            return [AuditRecord.of(r) for r in session.scalars(query)]

    def question_audits(
        self, tenant: str, question_ids: Sequence[str]
    ) -> list[QuestionAuditCounts]:
        """Per question with audit records: counts by status and the agreement and time of
        its latest `done` audit, in one statement (a grouped count joined to each question's
        latest done record). Questions without records are absent."""
        if not question_ids:
            return []
        scope = (
            AuditGroupRow.tenant == tenant,
            AuditGroupRow.question_id.in_(list(question_ids)),
        )

        def count(status: str) -> Any:
            return func.sum(case((AuditGroupRow.status == status, 1), else_=0))

        counts = (
            select(
                AuditGroupRow.question_id.label("question_id"),
                func.count().label("groups"),
                count("done").label("done"),
                count("failed").label("failed"),
                count("pending").label("pending"),
            )
            .where(*scope)
            .group_by(AuditGroupRow.question_id)
            .subquery("counts")
        )
        latest = (
            select(
                AuditGroupRow.question_id.label("question_id"),
                AuditGroupRow.result["agreement"].as_float().label("agreement"),
                AuditGroupRow.finished_at.label("finished_at"),
                func.row_number()
                .over(
                    partition_by=AuditGroupRow.question_id,
                    order_by=(
                        AuditGroupRow.finished_at.desc(),
                        AuditGroupRow.scoring_id.desc(),
                    ),
                )
                .label("rank"),
            )
            .where(*scope, AuditGroupRow.status == "done")
            .subquery("latest")
        )
        query = (
            select(
                counts.c.question_id,
                counts.c.groups,
                counts.c.done,
                counts.c.failed,
                counts.c.pending,
                latest.c.agreement,
                latest.c.finished_at,
            )
            .select_from(counts)
            .outerjoin(
                latest,
                and_(latest.c.question_id == counts.c.question_id, latest.c.rank == 1),
            )
            .order_by(counts.c.question_id)
        )
        with unit_of_work(self.engine, write=False) as session:
            rows = session.execute(query).all()
        return [
            QuestionAuditCounts(
                question_id=row.question_id,
                groups=int(row.groups),
                done=int(row.done or 0),
                failed=int(row.failed or 0),
                pending=int(row.pending or 0),
                last_agreement=None if row.agreement is None else float(row.agreement),
                last_audited_at=None if row.finished_at is None else as_utc(row.finished_at),
            )
            for row in rows
        ]

    def kept_group(
        self, tenant: str, scoring_id: str, *, now: datetime | None = None
    ) -> KeptGroup | None:
        """The record's kept submission (trajectories); None when there is no record."""
        query = select(
            AuditGroupRow.question_id, AuditGroupRow.group, AuditGroupRow.expires_at
        ).where(AuditGroupRow.tenant == tenant, AuditGroupRow.scoring_id == scoring_id)
        with unit_of_work(self.engine, write=False) as session:
            row = session.execute(query).one_or_none()
        if row is None:
            return None
        expired = row.expires_at is not None and as_utc(row.expires_at) <= (now or utcnow())
        kept = None if expired or row.group is None else dict(row.group)
        return KeptGroup(question_id=row.question_id, submission=kept)

    def recent_steps(
        self, tenant: str, *, question_id: str | None, steps: int
    ) -> list[AuditRecord]:
        """Every record of the tenant's latest `steps` training steps (records without a step
        are left out: signals are per step)."""
        scope = [AuditGroupRow.tenant == tenant, AuditGroupRow.step.is_not(None)]
        if question_id is not None:
            scope.append(AuditGroupRow.question_id == question_id)
        with unit_of_work(self.engine, write=False) as session:
            latest = list(
                session.scalars(
                    select(AuditGroupRow.step)
                    .where(*scope)
                    .distinct()
                    .order_by(AuditGroupRow.step.desc())
                    .limit(steps)
                )
            )
            if not latest:
                return []
            rows = session.scalars(
                select(AuditGroupRow)
                .options(WITHOUT_GROUP)
                .where(*scope, AuditGroupRow.step >= min(s for s in latest if s is not None))
                .order_by(AuditGroupRow.step, AuditGroupRow.created_at)
            )
            return [AuditRecord.of(r) for r in rows]

    def step_fingerprints(self, tenant: str, *, steps: int) -> dict[int, tuple[Any, ...]]:
        """The tenant's latest `steps` training steps, each with what changes whenever one of
        its records is added, finished or deleted: its count, finished count and latest
        created and finished times (`AuditService.tenant_signals` re-reads only the steps
        whose fingerprint changed)."""
        with unit_of_work(self.engine, write=False) as session:
            rows = session.execute(
                select(
                    AuditGroupRow.step,
                    func.count(),
                    func.count(AuditGroupRow.finished_at),
                    func.max(AuditGroupRow.created_at),
                    func.max(AuditGroupRow.finished_at),
                )
                .where(AuditGroupRow.tenant == tenant, AuditGroupRow.step.is_not(None))
                .group_by(AuditGroupRow.step)
                .order_by(AuditGroupRow.step.desc())
                .limit(steps)
            ).all()
        return {step: tuple(rest) for step, *rest in rows if step is not None}

    def step_records(self, tenant: str, steps: Sequence[int]) -> list[AuditRecord]:
        """Every record of the tenant's given training steps, in step and arrival order
        (without the kept trajectories)."""
        if not steps:
            return []
        with unit_of_work(self.engine, write=False) as session:
            rows = session.scalars(
                select(AuditGroupRow)
                .options(WITHOUT_GROUP)
                .where(AuditGroupRow.tenant == tenant, AuditGroupRow.step.in_(list(steps)))
                .order_by(AuditGroupRow.step, AuditGroupRow.created_at)
            )
            return [AuditRecord.of(r) for r in rows]

    # --- judge addressing of the other kinds ------------------------------------------------

    def record_addressing(self, tenant: str, report: AddressingReportIn) -> str:
        row_id = str(uuid.uuid4())
        with unit_of_work(self.engine, write=True) as session:
            session.add(
                AuditAddressingRow(
                    id=row_id,
                    tenant=tenant,
                    kind=report.kind,
                    step=report.step,
                    items=report.items,
                    flagged=report.flagged,
                    markers=list(report.markers),
                    created_at=utcnow(),
                )
            )
        return row_id

    def recent_addressing(self, tenant: str, *, since: datetime) -> list[AddressingRecord]:
        """The tenant's flagged requests recorded since `since`, oldest first."""
        with unit_of_work(self.engine, write=False) as session:
            rows = session.scalars(
                select(AuditAddressingRow)
                .where(AuditAddressingRow.tenant == tenant, AuditAddressingRow.created_at >= since)
                .order_by(AuditAddressingRow.created_at)
            )
            return [
                AddressingRecord(
                    kind=r.kind,
                    step=r.step,
                    items=r.items,
                    flagged=r.flagged,
                    markers=list(r.markers),
                    created_at=as_utc(r.created_at),
                )
                for r in rows
            ]

    def addressing_by_kind(self, *, since: datetime) -> dict[str, int]:
        """Flagged items recorded since `since`, all tenants, by kind."""
        with unit_of_work(self.engine, write=False) as session:
            rows = session.execute(
                select(AuditAddressingRow.kind, func.sum(AuditAddressingRow.flagged))
                .where(AuditAddressingRow.created_at >= since)
                .group_by(AuditAddressingRow.kind)
            )
            return {str(kind): int(total or 0) for kind, total in rows}

    def fingerprint(self) -> tuple[Any, ...]:
        """What changes whenever a signal can: the groups' count, finished count and latest
        created and finished times, and the flagged requests' count and latest time. Two
        equal fingerprints mean no group was added, finished or deleted and no flagged
        request recorded or dropped in between (`AuditService.publish_signals`)."""
        with unit_of_work(self.engine, write=False) as session:
            groups = session.execute(
                select(
                    func.count(),
                    func.count(AuditGroupRow.finished_at),
                    func.max(AuditGroupRow.created_at),
                    func.max(AuditGroupRow.finished_at),
                )
            ).one()
            flags = session.execute(
                select(func.count(), func.max(AuditAddressingRow.created_at))
            ).one()
        return (*groups, *flags)

    def tenants(self) -> list[str]:
        with unit_of_work(self.engine, write=False) as session:
            return list(session.scalars(select(AuditGroupRow.tenant).distinct()))

    # --- retention ------------------------------------------------------------------------

    def expire(
        self, *, now: datetime | None = None, addressing_before: datetime | None = None
    ) -> int:
        """Drop the kept submissions (trajectories) whose retention ran out; their summaries
        and results stay. With `addressing_before`, also delete the flagged requests of the
        other kinds recorded before it (they no longer count in any signal). Returns how many
        submissions were dropped."""
        when = now or utcnow()
        with unit_of_work(self.engine, write=True) as session:
            result = session.execute(
                update(AuditGroupRow)
                .where(AuditGroupRow.expires_at.is_not(None), AuditGroupRow.expires_at <= when)
                .values(group=None, expires_at=None)
            )
            if addressing_before is not None:
                session.execute(
                    delete(AuditAddressingRow).where(
                        AuditAddressingRow.created_at < addressing_before
                    )
                )
            return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def delete(self, tenant: str, *, question_id: str | None = None) -> int:
        """Delete a tenant's audit records (of one question, or all; all also deletes the
        tenant's flagged requests of the other kinds, which have no question). Returns how
        many groups were deleted."""
        query = delete(AuditGroupRow).where(AuditGroupRow.tenant == tenant)
        if question_id is not None:
            query = query.where(AuditGroupRow.question_id == question_id)
        with unit_of_work(self.engine, write=True) as session:
            if question_id is None:
                session.execute(
                    delete(AuditAddressingRow).where(AuditAddressingRow.tenant == tenant)
                )
            return int(session.execute(query).rowcount or 0)  # type: ignore[attr-defined]

    # --- replay ---------------------------------------------------------------------------

    def replay_groups(
        self,
        tenant: str,
        *,
        scoring_ids: Sequence[str] | None,
        question_id: str | None,
        step_from: int | None,
        step_to: int | None,
        limit: int,
    ) -> list[AuditRecord]:
        """The tenant's stored groups a replay selects, with their kept submissions (None
        where the retention ran out), the latest first."""
        query = select(AuditGroupRow).where(AuditGroupRow.tenant == tenant)
        if scoring_ids is not None:
            query = query.where(AuditGroupRow.scoring_id.in_(list(scoring_ids)))
        if question_id is not None:
            query = query.where(AuditGroupRow.question_id == question_id)
        if step_from is not None:
            query = query.where(AuditGroupRow.step >= step_from)
        if step_to is not None:
            query = query.where(AuditGroupRow.step <= step_to)
        query = query.order_by(AuditGroupRow.created_at.desc()).limit(limit)
        with unit_of_work(self.engine, write=False) as session:
            return [AuditRecord.of(r, with_group=True) for r in session.scalars(query)]

    def create_replay(self, tenant: str, params: dict[str, Any]) -> ReplayRecord:
        now = utcnow()
        row = AuditReplayRow(
            id=str(uuid.uuid4()),
            tenant=tenant,
            state="queued",
            params=params,
            progress=dict(NO_PROGRESS),
            created_at=now,
            updated_at=now,
        )
        with unit_of_work(self.engine, write=True) as session:
            session.add(row)
        return ReplayRecord.of(row)

    def get_replay(self, job_id: str, *, tenant: str | None = None) -> ReplayRecord | None:
        """A replay job; with `tenant`, only that tenant's."""
        with unit_of_work(self.engine, write=False) as session:
            row = session.get(AuditReplayRow, job_id)
            if row is None or (tenant is not None and row.tenant != tenant):
                return None
            return ReplayRecord.of(row)

    def list_replays(self, tenant: str, *, limit: int = 50) -> list[ReplayRecord]:
        """The tenant's replay jobs, newest first, without their results (read one job for
        its result); `params` holds only the judge."""
        query = (
            select(
                AuditReplayRow.id,
                AuditReplayRow.tenant,
                AuditReplayRow.state,
                AuditReplayRow.params["judge"].as_string().label("judge"),
                AuditReplayRow.progress,
                AuditReplayRow.error,
                AuditReplayRow.created_at,
                AuditReplayRow.finished_at,
            )
            .where(AuditReplayRow.tenant == tenant)
            .order_by(AuditReplayRow.created_at.desc(), AuditReplayRow.id.desc())
            .limit(limit)
        )
        with unit_of_work(self.engine, write=False) as session:
            rows = session.execute(query).all()
        return [
            ReplayRecord(
                id=row.id,
                tenant=row.tenant,
                state=row.state,
                params={} if row.judge is None else {"judge": row.judge},
                progress=dict(row.progress or {}),
                result=None,
                error=row.error,
                created_at=as_utc(row.created_at),
                finished_at=None if row.finished_at is None else as_utc(row.finished_at),
            )
            for row in rows
        ]

    def update_replay(
        self,
        job_id: str,
        *,
        state: str,
        progress: dict[str, Any],
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        with unit_of_work(self.engine, write=True) as session:
            row = session.get(AuditReplayRow, job_id)
            if row is None:
                return
            now = utcnow()
            row.state = state
            row.progress = progress
            row.result = result
            row.error = error
            row.updated_at = now
            if state in ("succeeded", "failed"):
                row.finished_at = now

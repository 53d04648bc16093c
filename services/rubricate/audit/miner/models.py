"""Tables of the reward audit, owned by the miner (its workers write the results).
Migrations: 0004 (groups, tenants, replays), 0008 (judge-addressing flags)."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from rubricate.db.base import Base, utcnow
from rubricate.db.limits import QUESTION_ID_LEN, SCORING_ID_LEN, TENANT_LEN


class AuditGroupRow(Base):
    """One scored group the audit saw. Every group keeps its summary (live rewards,
    trajectory lengths, judge-addressing markers); a sampled one also keeps what the
    reference judge needs (`group`, dropped when its retention runs out) and the result."""

    __tablename__ = "audit_groups"
    __table_args__ = (
        Index("ix_audit_groups_question", "tenant", "question_id", "step"),
        Index("ix_audit_groups_step", "tenant", "step"),
        Index("ix_audit_groups_expires_at", "expires_at"),
        CheckConstraint("status IN ('skipped', 'pending', 'done', 'failed')", name="status"),
    )

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    scoring_id: Mapped[str] = mapped_column(String(SCORING_ID_LEN), primary_key=True)
    question_id: Mapped[str] = mapped_column(String(QUESTION_ID_LEN))
    step: Mapped[int | None] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(String(16))
    """Why it was audited: `first` (of its question) or `sampled`; None when skipped."""
    summary: Mapped[dict[str, Any]] = mapped_column(JSON)
    group: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    """The submission (question, rubrics, trajectories, live judgments) while retained."""
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """When `group` is dropped; None: kept until deleted."""


class AuditTenantRow(Base):
    """A tenant's own audit settings (None: the service default)."""

    __tablename__ = "audit_tenants"

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    fraction: Mapped[float | None] = mapped_column(Float)
    retention_days: Mapped[int | None] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class AuditReplayRow(Base):
    """A replay job: stored groups re-scored with a chosen judge (`POST /v1/audit/replay`)."""

    __tablename__ = "audit_replays"
    __table_args__ = (
        Index("ix_audit_replays_tenant", "tenant", "created_at"),
        CheckConstraint("state IN ('queued', 'running', 'succeeded', 'failed')", name="state"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(TENANT_LEN))
    state: Mapped[str] = mapped_column(String(16))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The request (selection, judge) and, for `judge=buffer`, the buffer's rubrics."""
    progress: Mapped[dict[str, Any]] = mapped_column(JSON)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class AuditAddressingRow(Base):
    """One request of a judge kind other than stagewise (nugget, step, listwise, rank,
    reflection) in which the detection found text addressing the judge (GitHub issue 25):
    who, which kind, the trainer's step when known, how many items it had and how many were
    flagged, and the markers found (labels such as `action: label or verdict sheet`, never
    the texts). Counted in the audit's signals; dropped after the signal window."""

    __tablename__ = "audit_addressing"
    __table_args__ = (
        Index("ix_audit_addressing_tenant", "tenant", "created_at"),
        Index("ix_audit_addressing_created_at", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(TENANT_LEN))
    kind: Mapped[str] = mapped_column(String(16))
    step: Mapped[int | None] = mapped_column(BigInteger)
    items: Mapped[int] = mapped_column(Integer)
    flagged: Mapped[int] = mapped_column(Integer)
    markers: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

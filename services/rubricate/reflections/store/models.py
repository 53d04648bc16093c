"""Tables of the agent rubric bank (RubricEM §3.4) and its snapshots. Migrations: 0002, 0006
(review status, item versions, the listing's indexes). (The stored stagewise scorings that
`/v1/reflections/score` may reference by id are `stagewise.store.models.StagewiseScoringRow`.)"""

from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from rubricate.db.base import Base, utcnow
from rubricate.db.limits import QUESTION_ID_LEN, TENANT_LEN
from rubricate_client.schemas.curation import BankStatus

QUESTION_HASH_LEN = 64
AUTHOR_LEN = 200
"""Room for `common.auth.request_actor` (at most 200 characters)."""
SnapshotKind = Literal["bank", "buffer"]
VersionAction = Literal["accepted", "replaced", "approve", "edit", "retire", "restored"]


class BankItemRow(Base):
    """The bank's one item per (tenant, question): the best accepted reflection so far."""

    __tablename__ = "bank_items"
    __table_args__ = (
        CheckConstraint("status IN ('pending', 'approved', 'retired')", name="status"),
        Index("ix_bank_items_updated", "tenant", "updated_at"),
    )

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    question_hash: Mapped[str] = mapped_column(String(QUESTION_HASH_LEN), primary_key=True)
    question: Mapped[str] = mapped_column(Text)
    rubrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Reflection rubrics per category (core.reflection.CATEGORIES)."""
    takeaways: Mapped[list[str]] = mapped_column(JSON)
    reflection: Mapped[str] = mapped_column(Text)
    """The accepted candidate's full text."""
    score: Mapped[float] = mapped_column(Float)
    """Its utility u."""
    step: Mapped[int | None] = mapped_column(BigInteger)
    provenance: Mapped[dict[str, Any]] = mapped_column(JSON)
    embedding: Mapped[bytes | None] = mapped_column(LargeBinary)
    """The question's embedding (float32, little-endian): the vector index is rebuilt from
    it without re-embedding. None until embedded."""
    embedding_model: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    version: Mapped[int] = mapped_column(Integer, default=1)
    """The item's latest row in `bank_item_versions`: +1 per write (a replacement, a
    curation, a restore)."""
    status: Mapped[BankStatus] = mapped_column(
        String(16), default="pending", server_default="pending"
    )
    """`pending` until a person approves it; `retired` for good (never retrieved)."""
    reviewed_by: Mapped[str | None] = mapped_column(String(AUTHOR_LEN))
    """Who approved or retired it (None while pending)."""
    reviewed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class BankItemVersionRow(Base):
    """One version of a bank item, appended by every write of it: what it said after
    `action`, by whom and when. Not tied to `bank_items` by a foreign key: an item's history
    outlives the item (a restore may remove it)."""

    __tablename__ = "bank_item_versions"
    __table_args__ = (
        CheckConstraint(
            "action IN ('accepted', 'replaced', 'approve', 'edit', 'retire', 'restored')",
            name="action",
        ),
        CheckConstraint("status IN ('pending', 'approved', 'retired')", name="status"),
    )

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    question_hash: Mapped[str] = mapped_column(String(QUESTION_HASH_LEN), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    action: Mapped[VersionAction] = mapped_column(String(16))
    author: Mapped[str | None] = mapped_column(String(AUTHOR_LEN))
    """None for the platform's own writes (accepted, replaced, restored)."""
    reason: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    status: Mapped[BankStatus] = mapped_column(String(16))
    rubrics: Mapped[dict[str, Any]] = mapped_column(JSON)
    takeaways: Mapped[list[str]] = mapped_column(JSON)
    reflection: Mapped[str] = mapped_column(Text)
    score: Mapped[float] = mapped_column(Float)
    step: Mapped[int | None] = mapped_column(BigInteger)


class BankSnapshotRow(Base):
    """A snapshot's header; written in the same transaction as its entries."""

    __tablename__ = "bank_snapshots"

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    bank_items: Mapped[int] = mapped_column(Integer)
    questions: Mapped[int] = mapped_column(Integer)
    rubrics: Mapped[int] = mapped_column(Integer)


class BankSnapshotEntryRow(Base):
    """One bank item (`kind='bank'`, key = question hash) or one question's whole judge
    rubric buffer (`kind='buffer'`, key = question id) as of the snapshot's step."""

    __tablename__ = "bank_snapshot_entries"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant", "step"],
            ["bank_snapshots.tenant", "bank_snapshots.step"],
            ondelete="CASCADE",
        ),
        CheckConstraint("kind IN ('bank', 'buffer')", name="kind"),
    )

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[SnapshotKind] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(QUESTION_ID_LEN), primary_key=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)

"""Tables of the rubric buffer and of the stored stagewise scorings (SQLAlchemy 2 typed
declarative), owned by the store service. Migrations: `rubricate/db/migrations/versions`."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from rubricate.db.base import Base, utcnow
from rubricate.db.limits import QUESTION_ID_LEN, RUBRIC_ID_LEN, SCORING_ID_LEN, TENANT_LEN
from rubricate_client.schemas.curation import RubricAction
from rubricate_client.schemas.rubrics import Origin, Polarity, Rubric, Stage


class QuestionRow(Base):
    """One question's buffer header. Its row lock serializes every write to the buffer."""

    __tablename__ = "questions"
    __table_args__ = (Index("ix_questions_recent", "tenant", "updated_at"),)

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True, default="default")
    question_id: Mapped[str] = mapped_column(String(QUESTION_ID_LEN), primary_key=True)
    question: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    version: Mapped[int] = mapped_column(Integer, default=0)
    """Incremented by every write that changes the buffer."""


class RubricRow(Base):
    """A rubric in a question's buffer; pruned rubrics are kept, with `pruned_at` set. A
    retired rubric has both `retired_at` and `pruned_at` set (out of the buffer for good)."""

    __tablename__ = "rubrics"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant", "question_id"],
            ["questions.tenant", "questions.question_id"],
            ondelete="CASCADE",
        ),
        Index("ix_rubrics_live", "tenant", "question_id", "pruned_at"),
        CheckConstraint("stage IN ('plan', 'research', 'review', 'answer')", name="stage"),
        CheckConstraint("origin IN ('persistent', 'active')", name="origin"),
        CheckConstraint("polarity IN ('positive', 'negative')", name="polarity"),
        CheckConstraint("weight BETWEEN 1 AND 3", name="weight"),
    )

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    question_id: Mapped[str] = mapped_column(String(QUESTION_ID_LEN), primary_key=True)
    id: Mapped[str] = mapped_column(String(RUBRIC_ID_LEN), primary_key=True)
    stage: Mapped[Stage] = mapped_column(String(16))
    origin: Mapped[Origin] = mapped_column(String(16))
    title: Mapped[str] = mapped_column(Text)
    description: Mapped[str] = mapped_column(Text)
    weight: Mapped[int] = mapped_column(Integer)
    polarity: Mapped[Polarity] = mapped_column(String(16))
    created_step: Mapped[int | None] = mapped_column(BigInteger)
    variance: Mapped[float | None] = mapped_column(Float)
    """Score variance over the last group scored on it; None until measured."""
    seq: Mapped[int] = mapped_column(Integer)
    """Insertion order within the question (a re-activated rubric gets a new one)."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    pruned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    pruned_step: Mapped[int | None] = mapped_column(BigInteger)
    pinned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Set while a person has it pinned: never pruned."""
    pinned_by: Mapped[str | None] = mapped_column(Text)
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """Set when a person retired it (or edited it): never scored or re-activated again."""
    retired_by: Mapped[str | None] = mapped_column(Text)
    replaced_by: Mapped[str | None] = mapped_column(String(RUBRIC_ID_LEN))
    """The id of the rubric an edit replaced it with."""
    created_by: Mapped[str | None] = mapped_column(Text)
    """The person whose edit created it; None for generated and dataset rubrics."""

    def to_rubric(self) -> Rubric:
        """Rows were validated on the way in: no re-validation on the hot read path."""
        return Rubric.model_construct(
            id=self.id,
            stage=self.stage,
            origin=self.origin,
            title=self.title,
            description=self.description,
            weight=self.weight,
            polarity=self.polarity,
            created_step=self.created_step,
            variance=self.variance,
            pinned=self.pinned_at is not None,
        )


class RubricCurationRow(Base):
    """One change a person made to a rubric of a question's buffer (append-only). No foreign
    key to `questions`: a snapshot restore replaces the tenant's buffers, and the record of
    who changed what must outlive that."""

    __tablename__ = "rubric_curations"
    __table_args__ = (
        Index("ix_rubric_curations_at", "tenant", "question_id", "at"),
        CheckConstraint("action IN ('pin', 'unpin', 'retire', 'edit')", name="action"),
    )

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    question_id: Mapped[str] = mapped_column(String(QUESTION_ID_LEN), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    """Order of the event within the question (assigned under the question's lock)."""
    rubric_id: Mapped[str] = mapped_column(String(RUBRIC_ID_LEN))
    action: Mapped[RubricAction] = mapped_column(String(16))
    author: Mapped[str] = mapped_column(Text)
    reason: Mapped[str | None] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class StagewiseScoringRow(Base):
    """What a `/v1/stagewise/score` call judged, kept for reference by `scoring_id`."""

    __tablename__ = "stagewise_scorings"
    __table_args__ = (
        Index("ix_stagewise_scorings_created_at", "created_at"),
        Index("ix_stagewise_scorings_question", "tenant", "question_id", "created_at"),
    )

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    scoring_id: Mapped[str] = mapped_column(String(SCORING_ID_LEN), primary_key=True)
    question_id: Mapped[str] = mapped_column(String(QUESTION_ID_LEN))
    question: Mapped[str] = mapped_column(Text)
    step: Mapped[int | None] = mapped_column(BigInteger)
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

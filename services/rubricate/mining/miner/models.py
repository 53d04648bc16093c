"""Tables of the miner: corpora, jobs (with the stored search tree) and mined nuggets.

They live on the store's metadata so one Alembic history migrates everything
(`migrations/versions/0003_mining.py`; the job list's index: `0007_console_reads.py`).
"""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from rubricate.db.base import Base, utcnow
from rubricate.db.limits import TENANT_LEN

CORPUS_NAME_LEN = 64
JOB_ID_LEN = 36
JOB_KINDS = ("mine", "ingest")
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")


class CorpusRow(Base):
    __tablename__ = "mining_corpora"

    tenant: Mapped[str] = mapped_column(String(TENANT_LEN), primary_key=True)
    name: Mapped[str] = mapped_column(String(CORPUS_NAME_LEN), primary_key=True)
    embedding_model: Mapped[str] = mapped_column(String(256))
    dim: Mapped[int] = mapped_column(Integer)
    documents: Mapped[int] = mapped_column(Integer, default=0)
    passages: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JobRow(Base):
    """A mining or ingestion job. `tree` is the search state after the last step."""

    __tablename__ = "mining_jobs"
    __table_args__ = (
        CheckConstraint("kind IN ('mine', 'ingest')", name="kind"),
        CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')", name="state"
        ),
        Index("ix_mining_jobs_question", "tenant", "question_hash"),
        Index("ix_mining_jobs_state", "state"),
        Index("ix_mining_jobs_tenant_created", "tenant", "created_at"),  # the job list
    )

    id: Mapped[str] = mapped_column(String(JOB_ID_LEN), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(TENANT_LEN))
    kind: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    corpus: Mapped[str] = mapped_column(String(CORPUS_NAME_LEN))
    question: Mapped[str | None] = mapped_column(Text)
    question_hash: Mapped[str | None] = mapped_column(String(64))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    progress: Mapped[dict[str, Any]] = mapped_column(JSON)
    tree: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    """Times a worker claimed the job (more than one: it was resumed)."""
    steps: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(256))
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class MinedNuggetRow(Base):
    __tablename__ = "mined_nuggets"
    __table_args__ = (
        CheckConstraint("importance IN ('vital', 'okay')", name="importance"),
        Index("ix_mined_nuggets_question", "tenant", "question_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(
        String(JOB_ID_LEN), ForeignKey("mining_jobs.id", ondelete="CASCADE"), index=True
    )
    tenant: Mapped[str] = mapped_column(String(TENANT_LEN))
    question_hash: Mapped[str] = mapped_column(String(64))
    corpus: Mapped[str] = mapped_column(String(CORPUS_NAME_LEN))
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    importance: Mapped[str] = mapped_column(String(8))
    provenance: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    """[{passage_id, query_path: [question, rewrite, ...]}, ...]"""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

"""Nugget mining: corpora, jobs with their stored search tree, mined nuggets.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mining_corpora",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("embedding_model", sa.String(256), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("passages", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "name", name=op.f("pk_mining_corpora")),
    )
    op.create_table(
        "mining_jobs",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("corpus", sa.String(64), nullable=False),
        sa.Column("question", sa.Text(), nullable=True),
        sa.Column("question_hash", sa.String(64), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("tree", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("steps", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(256), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("kind IN ('mine', 'ingest')", name=op.f("ck_mining_jobs_kind")),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')",
            name=op.f("ck_mining_jobs_state"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mining_jobs")),
    )
    op.create_index("ix_mining_jobs_question", "mining_jobs", ["tenant", "question_hash"])
    op.create_index("ix_mining_jobs_state", "mining_jobs", ["state"])
    op.create_table(
        "mined_nuggets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("question_hash", sa.String(64), nullable=False),
        sa.Column("corpus", sa.String(64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("importance", sa.String(8), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "importance IN ('vital', 'okay')", name=op.f("ck_mined_nuggets_importance")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["mining_jobs.id"],
            name=op.f("fk_mined_nuggets_job_id_mining_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_mined_nuggets")),
    )
    op.create_index("ix_mined_nuggets_question", "mined_nuggets", ["tenant", "question_hash"])
    op.create_index(op.f("ix_mined_nuggets_job_id"), "mined_nuggets", ["job_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_mined_nuggets_job_id"), table_name="mined_nuggets")
    op.drop_index("ix_mined_nuggets_question", table_name="mined_nuggets")
    op.drop_table("mined_nuggets")
    op.drop_index("ix_mining_jobs_state", table_name="mining_jobs")
    op.drop_index("ix_mining_jobs_question", table_name="mining_jobs")
    op.drop_table("mining_jobs")
    op.drop_table("mining_corpora")

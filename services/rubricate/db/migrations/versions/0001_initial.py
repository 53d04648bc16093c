"""Questions and their rubric buffers.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "questions",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("question_id", sa.String(128), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "question_id", name=op.f("pk_questions")),
    )
    op.create_table(
        "rubrics",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("question_id", sa.String(128), nullable=False),
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("stage", sa.String(16), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("title", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("weight", sa.Integer(), nullable=False),
        sa.Column("polarity", sa.String(16), nullable=False),
        sa.Column("created_step", sa.BigInteger(), nullable=True),
        sa.Column("variance", sa.Float(), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pruned_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("pruned_step", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "stage IN ('plan', 'research', 'review', 'answer')", name=op.f("ck_rubrics_stage")
        ),
        sa.CheckConstraint("origin IN ('persistent', 'active')", name=op.f("ck_rubrics_origin")),
        sa.CheckConstraint(
            "polarity IN ('positive', 'negative')", name=op.f("ck_rubrics_polarity")
        ),
        sa.CheckConstraint("weight BETWEEN 1 AND 3", name=op.f("ck_rubrics_weight")),
        sa.ForeignKeyConstraint(
            ["tenant", "question_id"],
            ["questions.tenant", "questions.question_id"],
            name=op.f("fk_rubrics_tenant_questions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant", "question_id", "id", name=op.f("pk_rubrics")),
    )
    op.create_index(op.f("ix_rubrics_live"), "rubrics", ["tenant", "question_id", "pruned_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_rubrics_live"), table_name="rubrics")
    op.drop_table("rubrics")
    op.drop_table("questions")

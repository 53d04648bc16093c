"""Rubric curation: pinned and retired rubrics, the rubric curation log.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

RUBRIC_COLUMNS = ("pinned_at", "pinned_by", "retired_at", "retired_by", "replaced_by", "created_by")


def upgrade() -> None:
    # Nullable columns without defaults: a plain ALTER TABLE ADD COLUMN on both databases.
    op.add_column("rubrics", sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("rubrics", sa.Column("pinned_by", sa.Text(), nullable=True))
    op.add_column("rubrics", sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("rubrics", sa.Column("retired_by", sa.Text(), nullable=True))
    op.add_column("rubrics", sa.Column("replaced_by", sa.String(128), nullable=True))
    op.add_column("rubrics", sa.Column("created_by", sa.Text(), nullable=True))
    op.create_index(op.f("ix_questions_recent"), "questions", ["tenant", "updated_at"])
    op.create_table(
        "rubric_curations",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("question_id", sa.String(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("rubric_id", sa.String(128), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("author", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "action IN ('pin', 'unpin', 'retire', 'edit')",
            name=op.f("ck_rubric_curations_action"),
        ),
        sa.PrimaryKeyConstraint("tenant", "question_id", "seq", name=op.f("pk_rubric_curations")),
    )
    op.create_index(
        op.f("ix_rubric_curations_at"), "rubric_curations", ["tenant", "question_id", "at"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_rubric_curations_at"), table_name="rubric_curations")
    op.drop_table("rubric_curations")
    op.drop_index(op.f("ix_questions_recent"), table_name="questions")
    with op.batch_alter_table("rubrics") as batch:
        for name in reversed(RUBRIC_COLUMNS):
            batch.drop_column(name)

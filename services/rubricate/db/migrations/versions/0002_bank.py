"""The agent rubric bank (RubricEM §3.4), its snapshots, and stored stagewise scorings.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "bank_items",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("question_hash", sa.String(64), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("rubrics", sa.JSON(), nullable=False),
        sa.Column("takeaways", sa.JSON(), nullable=False),
        sa.Column("reflection", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("embedding", sa.LargeBinary(), nullable=True),
        sa.Column("embedding_model", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "question_hash", name=op.f("pk_bank_items")),
    )
    op.create_table(
        "stagewise_scorings",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("scoring_id", sa.String(64), nullable=False),
        sa.Column("question_id", sa.String(128), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "scoring_id", name=op.f("pk_stagewise_scorings")),
    )
    op.create_index(op.f("ix_stagewise_scorings_created_at"), "stagewise_scorings", ["created_at"])
    op.create_table(
        "bank_snapshots",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("bank_items", sa.Integer(), nullable=False),
        sa.Column("questions", sa.Integer(), nullable=False),
        sa.Column("rubrics", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "step", name=op.f("pk_bank_snapshots")),
    )
    op.create_table(
        "bank_snapshot_entries",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.CheckConstraint(
            "kind IN ('bank', 'buffer')", name=op.f("ck_bank_snapshot_entries_kind")
        ),
        sa.ForeignKeyConstraint(
            ["tenant", "step"],
            ["bank_snapshots.tenant", "bank_snapshots.step"],
            name=op.f("fk_bank_snapshot_entries_tenant_bank_snapshots"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant", "step", "kind", "key", name=op.f("pk_bank_snapshot_entries")
        ),
    )


def downgrade() -> None:
    op.drop_table("bank_snapshot_entries")
    op.drop_table("bank_snapshots")
    op.drop_index(op.f("ix_stagewise_scorings_created_at"), table_name="stagewise_scorings")
    op.drop_table("stagewise_scorings")
    op.drop_table("bank_items")

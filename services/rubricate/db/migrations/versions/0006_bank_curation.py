"""Bank curation: review status, item versions; stored scorings by question.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STATUSES = "status IN ('pending', 'approved', 'retired')"
ACTIONS = "action IN ('accepted', 'replaced', 'approve', 'edit', 'retire', 'restored')"


def upgrade() -> None:
    # A CHECK constraint on an existing table: SQLite rebuilds the table (batch mode), and
    # the server default gives every existing item the status `pending`.
    with op.batch_alter_table("bank_items") as batch:
        batch.add_column(
            sa.Column("status", sa.String(16), nullable=False, server_default="pending")
        )
        batch.add_column(sa.Column("reviewed_by", sa.String(200), nullable=True))
        batch.add_column(sa.Column("reviewed_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_check_constraint(op.f("ck_bank_items_status"), STATUSES)
    op.create_index("ix_bank_items_updated", "bank_items", ["tenant", "updated_at"])
    op.create_table(
        "bank_item_versions",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("question_hash", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("author", sa.String(200), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rubrics", sa.JSON(), nullable=False),
        sa.Column("takeaways", sa.JSON(), nullable=False),
        sa.Column("reflection", sa.Text(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(ACTIONS, name=op.f("ck_bank_item_versions_action")),
        sa.CheckConstraint(STATUSES, name=op.f("ck_bank_item_versions_status")),
        sa.PrimaryKeyConstraint(
            "tenant", "question_hash", "version", name=op.f("pk_bank_item_versions")
        ),
    )
    # The items written before this revision: their current version starts their history.
    op.execute(
        "INSERT INTO bank_item_versions (tenant, question_hash, version, action, author, "
        "reason, at, status, rubrics, takeaways, reflection, score, step) "
        "SELECT tenant, question_hash, version, "
        "CASE WHEN version > 1 THEN 'replaced' ELSE 'accepted' END, NULL, NULL, updated_at, "
        "status, rubrics, takeaways, reflection, score, step FROM bank_items"
    )
    op.create_index(
        "ix_stagewise_scorings_question",
        "stagewise_scorings",
        ["tenant", "question_id", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_stagewise_scorings_question", table_name="stagewise_scorings")
    op.drop_table("bank_item_versions")
    op.drop_index("ix_bank_items_updated", table_name="bank_items")
    with op.batch_alter_table("bank_items") as batch:
        batch.drop_constraint(op.f("ck_bank_items_status"), type_="check")
        batch.drop_column("reviewed_at")
        batch.drop_column("reviewed_by")
        batch.drop_column("status")

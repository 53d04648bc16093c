"""Reward audit: requests of the other judge kinds (nugget, step, listwise, rank,
reflection) flagged for text that addresses the judge (GitHub issue 25).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_addressing",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("flagged", sa.Integer(), nullable=False),
        sa.Column("markers", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_addressing")),
    )
    op.create_index("ix_audit_addressing_tenant", "audit_addressing", ["tenant", "created_at"])
    op.create_index("ix_audit_addressing_created_at", "audit_addressing", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_audit_addressing_created_at", table_name="audit_addressing")
    op.drop_index("ix_audit_addressing_tenant", table_name="audit_addressing")
    op.drop_table("audit_addressing")

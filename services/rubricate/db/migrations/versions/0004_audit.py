"""Reward audit: audited groups, per-tenant audit settings, replay jobs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_groups",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("scoring_id", sa.String(64), nullable=False),
        sa.Column("question_id", sa.String(128), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(16), nullable=True),
        sa.Column("summary", sa.JSON(), nullable=False),
        sa.Column("group", sa.JSON(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('skipped', 'pending', 'done', 'failed')",
            name=op.f("ck_audit_groups_status"),
        ),
        sa.PrimaryKeyConstraint("tenant", "scoring_id", name=op.f("pk_audit_groups")),
    )
    op.create_index("ix_audit_groups_question", "audit_groups", ["tenant", "question_id", "step"])
    op.create_index("ix_audit_groups_step", "audit_groups", ["tenant", "step"])
    op.create_index("ix_audit_groups_expires_at", "audit_groups", ["expires_at"])
    op.create_table(
        "audit_tenants",
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("fraction", sa.Float(), nullable=True),
        sa.Column("retention_days", sa.Integer(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("tenant", name=op.f("pk_audit_tenants")),
    )

    op.create_table(
        "audit_replays",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed')",
            name=op.f("ck_audit_replays_state"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_replays")),
    )
    op.create_index("ix_audit_replays_tenant", "audit_replays", ["tenant", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_audit_replays_tenant", table_name="audit_replays")
    op.drop_table("audit_replays")
    op.drop_table("audit_tenants")
    op.drop_index("ix_audit_groups_expires_at", table_name="audit_groups")
    op.drop_index("ix_audit_groups_step", table_name="audit_groups")
    op.drop_index("ix_audit_groups_question", table_name="audit_groups")
    op.drop_table("audit_groups")

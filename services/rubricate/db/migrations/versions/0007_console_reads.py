"""Console reads: the tenant's job list, newest first.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_mining_jobs_tenant_created", "mining_jobs", ["tenant", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_mining_jobs_tenant_created", table_name="mining_jobs")

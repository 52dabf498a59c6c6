"""deliveries and event batches: a claim names the broker message that brought the job; a worker's event
batch is stored once

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.db.models import UtcDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "job_deliveries",
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("secret_hash"),
    )
    op.create_index("ix_job_deliveries_job_id", "job_deliveries", ["job_id"])
    op.create_table(
        "job_event_batches",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("batch", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "run_id", "batch"),
    )


def downgrade() -> None:
    op.drop_table("job_event_batches")
    op.drop_index("ix_job_deliveries_job_id", table_name="job_deliveries")
    op.drop_table("job_deliveries")

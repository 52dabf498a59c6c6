"""worker runs: a run id per worker process, and the run that claimed each job

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("workers") as batch:
        batch.add_column(sa.Column("run_id", sa.String(length=32), nullable=True))
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("worker_run", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("worker_run")
    with op.batch_alter_table("workers") as batch:
        batch.drop_column("run_id")

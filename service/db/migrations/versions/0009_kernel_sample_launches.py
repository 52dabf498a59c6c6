"""kernel samples: the timing pass's launch durations (at most 256 per kernel and job)

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("kernel_samples") as table:
        table.add_column(sa.Column("launch_ns", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("kernel_samples") as table:
        table.drop_column("launch_ns")

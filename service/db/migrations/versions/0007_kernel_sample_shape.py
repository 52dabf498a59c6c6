"""kernel samples: the launch shape hash beside the code hash, and whether the counters were reused

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("kernel_samples") as table:
        table.add_column(sa.Column("shape_hash", sa.String(length=16), nullable=True))
        table.add_column(sa.Column("counters_reused", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("kernel_samples") as table:
        table.drop_column("counters_reused")
        table.drop_column("shape_hash")

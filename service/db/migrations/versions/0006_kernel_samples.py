"""kernel samples: each finished job's time per kernel, the points of a kernel's time series

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from service.db.models import UtcDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kernel_samples",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("repository", sa.String(length=200), nullable=True),
        sa.Column("commit", sa.Text(), nullable=True),
        sa.Column("ref", sa.Text(), nullable=True),
        sa.Column("device", sa.String(length=200), nullable=True),
        sa.Column("kernel", sa.String(length=2000), nullable=False),
        sa.Column("demangled", sa.Text(), nullable=False),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("code_hash", sa.String(length=64), nullable=True),
        sa.Column("launches", sa.BigInteger(), nullable=False),
        sa.Column("median_ns", sa.Float(), nullable=False),
        sa.Column("mean_ns", sa.Float(), nullable=False),
        sa.Column("total_ns", sa.BigInteger(), nullable=False),
        sa.Column("created_at", UtcDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("job_id", "kernel", name="uq_kernel_samples_job_id_kernel"),
    )
    op.create_index("ix_kernel_samples_created_at", "kernel_samples", ["created_at"])
    op.create_index(
        "ix_kernel_samples_repository_kernel_device",
        "kernel_samples",
        ["repository", "kernel", "device", "created_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_kernel_samples_repository_kernel_device", table_name="kernel_samples")
    op.drop_index("ix_kernel_samples_created_at", table_name="kernel_samples")
    op.drop_table("kernel_samples")

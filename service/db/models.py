"""SQLAlchemy models. The same models serve SQLite (embedded) and PostgreSQL (production)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "FINISHED",
    "JOB_STATES",
    "ApiToken",
    "Base",
    "CounterEntry",
    "Job",
    "JobArchive",
    "JobDelivery",
    "JobEvent",
    "JobEventBatch",
    "JobSecret",
    "KernelSample",
    "Worker",
    "utcnow",
]

JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")
FINISHED = ("succeeded", "failed", "cancelled")


def utcnow() -> datetime:
    return datetime.now(UTC)


class UtcDateTime(TypeDecorator[datetime]):
    """Timezone-aware datetimes in and out, on SQLite (which stores none) as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime given to the database")
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class Base(DeclarativeBase):
    pass


class Job(Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    status: Mapped[str] = mapped_column(String(16), index=True)
    queue: Mapped[str] = mapped_column(String(64))
    priority: Mapped[int] = mapped_column(Integer, default=5)
    repository: Mapped[str | None] = mapped_column(String(200), index=True)
    source: Mapped[str] = mapped_column(String(16), doc="'git' or 'archive'")
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    spec_hash: Mapped[str] = mapped_column(String(64))
    idempotency_scope: Mapped[str | None] = mapped_column(String(300), unique=True)
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, index=True)
    dispatched_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    dispatch_count: Mapped[int] = mapped_column(Integer, default=0)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    worker: Mapped[str | None] = mapped_column(String(200))
    worker_run: Mapped[str | None] = mapped_column(
        String(32), doc="The run id of the worker process that claimed it (Worker.run_id)"
    )
    runs: Mapped[int] = mapped_column(Integer, default=0, doc="How often a worker started it")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    outcome: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(Text)
    speedup: Mapped[float | None] = mapped_column(Float)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    diff: Mapped[str | None] = mapped_column(Text)
    summary: Mapped[str | None] = mapped_column(Text, doc="The Markdown summary (the PR body)")
    pr_url: Mapped[str | None] = mapped_column(String(500))

    __table_args__ = (Index("ix_jobs_queue_status", "queue", "status"),)


class JobArchive(Base):
    """An uploaded project, kept in the database so that any worker that reaches it can run the job."""

    __tablename__ = "job_archives"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class JobSecret(Base):
    """A secret sent with a job (see service.secrets), encrypted; deleted when the job finishes."""

    __tablename__ = "job_secrets"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(32), primary_key=True)
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)


class JobDelivery(Base):
    """One broker message that carries a job: the SHA-256 of the secret in that message. A worker's claim
    must name one of its job's deliveries, so the worker token alone claims nothing. Written before the
    message is sent; deleted when the job finishes."""

    __tablename__ = "job_deliveries"

    secret_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class JobEventBatch(Base):
    """A batch of events a worker run has stored, by its sequence number: the same batch sent again (its
    first answer lost) is recognised and not stored twice."""

    __tablename__ = "job_event_batches"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    batch: Mapped[int] = mapped_column(Integer, primary_key=True)


class JobEvent(Base):
    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    kind: Mapped[str] = mapped_column(String(16), doc="'state', 'stage' or 'log'")
    stage: Mapped[str | None] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)

    __table_args__ = (Index("ix_job_events_job_id_id", "job_id", "id"),)


KERNEL_NAME_LENGTH = 2000
"""The longest mangled kernel name (in UTF-8 bytes) a sample keeps: the kernel is part of two index keys,
and PostgreSQL's B-tree entries hold at most about 2,700 bytes."""
DEVICE_NAME_LENGTH = 200


class KernelSample(Base):
    """One kernel's time in one finished job: the points of the kernel's time series in its repository
    (service.kernel_samples). Written with the job's end, from its report; removed after
    ``kernel_sample_retention_days``."""

    __tablename__ = "kernel_samples"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    repository: Mapped[str | None] = mapped_column(String(200), doc="owner/name; None for an archive job")
    commit: Mapped[str | None] = mapped_column(Text, doc="The spec's repository commit, else its ref")
    ref: Mapped[str | None] = mapped_column(Text)
    device: Mapped[str | None] = mapped_column(String(DEVICE_NAME_LENGTH), doc="The report's device.name")
    kernel: Mapped[str] = mapped_column(String(KERNEL_NAME_LENGTH), doc="Mangled name as launched")
    demangled: Mapped[str] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(
        Text, doc="file:line of the first source location a diagnosis of the kernel gives"
    )
    code_hash: Mapped[str | None] = mapped_column(
        String(64), doc="The kernel's machine code hash from the timing pass (None where it saw none)"
    )
    shape_hash: Mapped[str | None] = mapped_column(
        String(16), doc="A hash of the kernel's launch configurations (grid, block, shared memory)"
    )
    counters_reused: Mapped[bool | None] = mapped_column(
        Boolean, doc="Whether its diagnosis came from an earlier run's counters (None: not profiled)"
    )
    launches: Mapped[int] = mapped_column(BigInteger)
    median_ns: Mapped[float] = mapped_column(Float)
    mean_ns: Mapped[float] = mapped_column(Float)
    total_ns: Mapped[int] = mapped_column(BigInteger)
    launch_ns: Mapped[list[int] | None] = mapped_column(
        JSON,
        doc="The report's launch durations (at most 256, evenly over the run); None before they were kept",
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, index=True)

    __table_args__ = (
        # also the index on job_id (its leading column), for the cascade from jobs
        UniqueConstraint("job_id", "kernel", name="uq_kernel_samples_job_id_kernel"),
        # a repository's kernels (per device), and one kernel's series in time order
        Index("ix_kernel_samples_repository_kernel_device", "repository", "kernel", "device", "created_at"),
    )


class CounterEntry(Base):
    """A kernel's counters a job published for later jobs of its repository to reuse (a StoredCounters
    of intelliperf.engine.counter_store, as the job wrote it, checked): service.counter_entries. Publishing
    a key again replaces it; the repository's oldest go first beyond ``counter_store_max_bytes``."""

    __tablename__ = "counter_entries"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    repository: Mapped[str] = mapped_column(String(200), doc="owner/name in lower case")
    key: Mapped[str] = mapped_column(String(64), doc="The sha256 of the entry's key: its file's name stem")
    body: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(Integer, doc="len(body)")
    job_id: Mapped[str | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), doc="The job that published it"
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, doc="When last published")

    __table_args__ = (
        # also the index of a repository's entries (its leading column)
        UniqueConstraint("repository", "key", name="uq_counter_entries_repository_key"),
    )


class ApiToken(Base):
    """A bearer token, stored as the SHA-256 of its secret (the secret is 256 random bits, so a slow
    password hash would add latency to every request and no protection)."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(16), doc="The first characters, to recognise a token by")
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    repositories: Mapped[list[str]] = mapped_column(JSON, doc="'owner/name', 'owner/*' or '*'")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class DashboardSession(Base):
    """A dashboard login. The browser's cookie holds only the session's secret, stored here as its
    SHA-256; the session stands for an API token (``token_id``) or for the admin token (``admin_hash``: the
    hash of the admin secret at login, so rotating that secret ends its sessions)."""

    __tablename__ = "dashboard_sessions"

    secret_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    token_id: Mapped[int | None] = mapped_column(ForeignKey("api_tokens.id", ondelete="CASCADE"))
    admin_hash: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime())


class Worker(Base):
    __tablename__ = "workers"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    hostname: Mapped[str] = mapped_column(String(200))
    queues: Mapped[list[str]] = mapped_column(JSON)
    gpu_vendor: Mapped[str | None] = mapped_column(String(16))
    gpu_name: Mapped[str | None] = mapped_column(String(200))
    gpu_arch: Mapped[str | None] = mapped_column(String(32))
    gpu_memory_bytes: Mapped[int | None] = mapped_column(BigInteger)
    current_job: Mapped[str | None] = mapped_column(String(32))
    run_id: Mapped[str | None] = mapped_column(
        String(32), doc="Which process sends the heartbeats under this name: a new id at every process start"
    )
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    last_heartbeat: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

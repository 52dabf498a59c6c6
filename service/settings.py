"""Settings of the service, from the environment (INTELLIPERF_*); a worker reads worker.settings."""

from __future__ import annotations

from functools import cache

from pydantic import Field, SecretStr

from intelliperf.jobqueue import QueueSettings

__all__ = ["ServiceSettings", "get_service_settings"]


class ServiceSettings(QueueSettings):
    """The service's settings; the queue's (data_dir, broker_url, heartbeat_s, job_time_limit_s) are shared
    with the workers (intelliperf.jobqueue)."""

    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db (default: SQLite in data_dir)",
    )
    admin_token: SecretStr | None = Field(default=None, description="Bootstrap token with every right")
    secret_key: SecretStr | None = Field(
        default=None,
        description="Encrypts job secrets (GitHub token, LLM key) at rest; never leaves the service",
    )
    worker_token: SecretStr | None = Field(
        default=None,
        description="The token workers present on the worker API (claim, heartbeat, events, result, a job's "
        "archive and secrets); without it the worker API refuses every call",
    )
    max_upload_bytes: int = Field(default=64 * 2**20, gt=0, description="Largest project archive accepted")
    max_archive_bytes: int = Field(default=512 * 2**20, gt=0, description="Largest archive content")
    max_archive_members: int = Field(default=20_000, gt=0)
    archive_check_workers: int = Field(
        default=1,
        gt=0,
        description="Processes (low priority; per API process) checking uploaded archives, one at a time",
    )
    archive_check_max_waiting: int = Field(
        default=8,
        ge=0,
        description="Uploads that may wait for a free archive-checking process; beyond them: 503",
    )
    archive_checks_per_token: int = Field(
        default=2, gt=0, description="Archive checks one token may have in progress; beyond them: 429"
    )
    archive_checks_per_token_per_minute: int = Field(
        default=30, gt=0, description="Archive checks one token may start in any minute; beyond them: 429"
    )
    dispatch_sweep_s: float = Field(
        default=5.0, gt=0, description="How often queued jobs are checked against the broker"
    )
    redispatch_after_s: float = Field(
        default=600.0,
        gt=0,
        description="A queued job not started after this long is sent to the broker again",
    )
    worker_stale_s: float = Field(
        default=60.0, gt=0, description="A worker whose last heartbeat is older than this is presumed dead"
    )
    worker_forget_s: float = Field(
        default=7 * 24 * 3600.0,
        gt=0,
        description="A worker not heard from for this long no longer counts as serving its GPU queues: jobs "
        "for a queue only forgotten workers served are refused at submit",
    )
    secure_cookies: bool = Field(
        default=False,
        description="Mark the dashboard's session cookie Secure whatever scheme the service sees; set it "
        "when users reach the service over HTTPS through a proxy that is not in forwarded_allow_ips",
    )
    forwarded_allow_ips: str = Field(
        default="127.0.0.1",
        description="Proxies whose X-Forwarded-Proto and X-Forwarded-For the service believes "
        "(comma-separated addresses or networks, or '*'): a request they forward over HTTPS gets a Secure "
        "cookie",
    )
    fleet_cache_s: float = Field(
        default=5.0, ge=0, description="How long submissions reuse one reading of the queues workers serve"
    )
    events_poll_s: float = Field(default=0.25, gt=0, description="How often an event stream checks for news")
    public_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s]+$",
        description="The address users reach the service at, for links it hands out (a job's reproducer in "
        "its pull request); unset: the address the worker called it at",
    )
    max_reproducer_bytes: int = Field(
        default=2 * 2**30,
        gt=0,
        description="Largest reproducer (a job's captured launch and both kernels, gzipped tar) a worker may "
        "store with the job",
    )
    kernel_sample_retention_days: int = Field(
        default=180,
        ge=1,
        description="Kernel samples (each finished job's time per kernel, /v1/kernels) older than this are "
        "deleted",
    )
    counter_store_max_bytes: int = Field(
        default=256 * 2**20,
        gt=0,
        description="Counter entries kept per repository, in bytes (what each of its jobs downloads at most, "
        "so an unchanged kernel skips the counter pass): a job that publishes beyond it drops the "
        "repository's oldest entries first, and an entry larger than it is refused",
    )

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'intelliperf.db'}"

    @property
    def admin_secret(self) -> str | None:
        return self.admin_token.get_secret_value() if self.admin_token else None

    @property
    def worker_secret(self) -> str | None:
        return self.worker_token.get_secret_value() if self.worker_token else None


@cache
def get_service_settings() -> ServiceSettings:
    return ServiceSettings()

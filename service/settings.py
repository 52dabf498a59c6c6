"""Settings of the service and its workers, from the environment (INTELLIPERF_*)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ServiceSettings", "get_service_settings"]


class ServiceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTELLIPERF_", extra="ignore", env_ignore_empty=True)

    data_dir: Path = Field(
        default=Path("intelliperf-data"),
        description="Where the embedded defaults live: the SQLite database, the filesystem broker",
    )
    database_url: str | None = Field(
        default=None,
        description="SQLAlchemy URL, e.g. postgresql+psycopg://user@host/db (default: SQLite in data_dir)",
    )
    broker_url: str | None = Field(
        default=None, description="Celery broker, e.g. redis://127.0.0.1:6379/0 (default: files in data_dir)"
    )
    admin_token: SecretStr | None = Field(default=None, description="Bootstrap token with every right")
    secret_key: SecretStr | None = Field(
        default=None, description="Encrypts job secrets (GitHub token, LLM key) at rest; shared with workers"
    )
    max_upload_bytes: int = Field(default=64 * 2**20, gt=0, description="Largest project archive accepted")
    max_archive_bytes: int = Field(default=512 * 2**20, gt=0, description="Largest archive content")
    max_archive_members: int = Field(default=20_000, gt=0)
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
    heartbeat_s: float = Field(default=10.0, gt=0, description="How often workers report")
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
    job_time_limit_s: float = Field(
        default=6 * 3600,
        gt=0,
        description="Hard limit of any job; the broker's visibility timeout exceeds it",
    )
    executor: Literal["auto", "container", "local"] = Field(
        default="auto",
        description="Where workers run the engine: a container (docker SDK), a local subprocess, or a "
        "container when a Docker engine answers and has the worker image",
    )
    worker_image: str = Field(
        default="intelliperf-worker:latest", description="Image of jobs whose spec names none"
    )
    docker_host: str | None = Field(
        default=None,
        description="Docker Engine API, e.g. unix:///run/podman.sock (default: $DOCKER_HOST or docker.sock)",
    )
    container_network: str = Field(
        default="bridge",
        description="Network of job containers: bridge reaches the LLM but not the worker's loopback; "
        "host when the LLM endpoint is on the worker's loopback; none for diagnosis only",
    )

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'intelliperf.db'}"

    @property
    def admin_secret(self) -> str | None:
        return self.admin_token.get_secret_value() if self.admin_token else None

    @property
    def resolved_broker_url(self) -> str:
        return self.broker_url or "filesystem://"

    @property
    def broker_folder(self) -> Path:
        """The embedded broker's message folder (only used without a broker URL)."""
        return self.data_dir.resolve() / "broker"


@cache
def get_service_settings() -> ServiceSettings:
    return ServiceSettings()

"""The job queue both sides share: the service publishes job ids, workers consume them (Celery).

One queue per GPU kind (``gpu.nvidia.sm90``; ``gpu.nvidia.any`` for jobs that name no architecture).
Messages carry only the job id: the service holds the job. Jobs run for hours with ``acks_late``, so
the broker's visibility timeout must outlast the longest job, or Redis hands the message to a second
worker while the first still runs (the service's claim makes that harmless, but wasteful).

``QueueSettings`` are what both the service and a worker read from the environment; Celery is imported
when an app is made (the engine's own install has no Celery). Their ``data_dir`` (INTELLIPERF_DATA_DIR) is
the embedded default's folder, by default the user's data directory (``default_data_dir``): `intelliperf
serve`, `intelliperf tokens` and a worker on the filesystem broker all find the same one, whatever folder
they are started in.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from intelliperf.repository_hosts import HOSTS_SETTING, normalized_host

if TYPE_CHECKING:
    from celery import Celery

__all__ = [
    "FILESYSTEM_BROKER",
    "RUN_JOB",
    "QueueSettings",
    "celery_priority",
    "default_data_dir",
    "make_celery",
]

RUN_JOB = "intelliperf.run_job"
FILESYSTEM_BROKER = "filesystem://localhost/"
"""The embedded broker's URL: its folders are transport options (``make_celery``); the host is named so
kombu does not warn that none was supplied."""


def default_data_dir() -> Path:
    """The user's data directory for IntelliPerf: platformdirs' ``user_data_dir("intelliperf")``
    (``$XDG_DATA_HOME/intelliperf``, else ``~/.local/share/intelliperf`` on Linux; ``~/Library/Application
    Support/intelliperf`` on macOS). Without platformdirs (an install without the service extra, such as a
    GPU node's worker, which needs no data folder unless it uses the filesystem broker) the same folder is
    found as platformdirs finds it on Linux. Where no home directory can be found (a container's user
    without one), ``intelliperf-data`` in the working folder, as before there was a default of the user's."""
    try:
        from platformdirs import user_data_dir
    except ImportError:
        xdg = os.environ.get("XDG_DATA_HOME", "")
        base = xdg if os.path.isabs(xdg) else os.path.expanduser("~/.local/share")
        return Path(base) / "intelliperf" if os.path.isabs(base) else Path("intelliperf-data")
    try:
        return Path(user_data_dir("intelliperf"))
    except RuntimeError:  # no home directory
        return Path("intelliperf-data")


class QueueSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="INTELLIPERF_", extra="ignore", env_ignore_empty=True)

    data_dir: Path = Field(
        default_factory=default_data_dir,
        description="Where the embedded defaults live: the SQLite database, the filesystem broker, the "
        "secrets `intelliperf serve` makes and its log (default: the user's data directory)",
    )
    broker_url: str | None = Field(
        default=None, description="Celery broker, e.g. redis://127.0.0.1:6379/0 (default: files in data_dir)"
    )
    heartbeat_s: float = Field(default=10.0, gt=0, description="How often workers report")
    job_time_limit_s: float = Field(
        default=6 * 3600,
        gt=0,
        description="Hard limit of any job; the broker's visibility timeout exceeds it",
    )
    github_hosts: Annotated[list[str], NoDecode] = Field(
        default=["github.com"],
        description="The git hosts (host or host:port, comma-separated in the environment) a job's "
        "repository may be on: the only ones git credentials are sent to, over https",
    )

    @field_validator("data_dir")
    @classmethod
    def _expand_home(cls, folder: Path) -> Path:
        return folder.expanduser()  # "~/..." means the same folder to serve, tokens and workers

    @field_validator("github_hosts", mode="before")
    @classmethod
    def _split_hosts(cls, value: object) -> object:
        return value.split(",") if isinstance(value, str) else value

    @field_validator("github_hosts")
    @classmethod
    def _normalize_hosts(cls, hosts: list[str]) -> list[str]:
        if not hosts:
            raise ValueError(f"{HOSTS_SETTING} names no host; e.g. github.com,ghe.corp.example:8443")
        try:
            return list(dict.fromkeys(normalized_host(host) for host in hosts))
        except ValueError as exc:
            raise ValueError(
                f"{HOSTS_SETTING}: {exc} (a comma-separated list such as github.com,ghe.corp.example:8443)"
            ) from None

    @property
    def resolved_broker_url(self) -> str:
        return self.broker_url or FILESYSTEM_BROKER

    @property
    def broker_folder(self) -> Path:
        """The embedded broker's message folder (only used without a broker URL)."""
        return self.data_dir.resolve() / "broker"


def celery_priority(priority: int) -> int:
    """The API's priority (0 lowest .. 9 highest) as Celery's Redis priority (0 is served first)."""
    return 9 - max(0, min(9, priority))


def make_celery(settings: QueueSettings) -> Celery:
    from celery import Celery

    broker = settings.resolved_broker_url
    options: dict[str, object] = {"visibility_timeout": int(settings.job_time_limit_s + 3600)}
    if broker.startswith("redis"):
        options |= {"priority_steps": list(range(10)), "sep": ":", "queue_order_strategy": "priority"}
    elif broker.startswith("filesystem"):
        folder = settings.broker_folder
        for sub in ("out", "processed", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        options |= {
            "data_folder_in": str(folder / "out"),
            "data_folder_out": str(folder / "out"),
            "processed_folder": str(folder / "processed"),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        }
    app = Celery("intelliperf", broker=broker, set_as_current=False)
    app.conf.update(
        broker_transport_options=options,
        broker_connection_timeout=3,
        broker_connection_retry_on_startup=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        task_default_queue="gpu.nvidia.any",
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    return app

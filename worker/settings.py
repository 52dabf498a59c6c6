"""A worker's settings, from the environment (INTELLIPERF_*): the broker, the service's URL and the worker
token, and where jobs run. No database URL and no secret key: a GPU node reaches the service over its
worker API (service/api/worker_api.py) and is given each job's secrets with its claim."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr

from intelliperf.jobqueue import QueueSettings

__all__ = ["WorkerSettings", "get_worker_settings"]


class WorkerSettings(QueueSettings):
    service_url: str = Field(
        default="http://127.0.0.1:8000",
        description="The IntelliPerf service the worker claims jobs from and reports to",
    )
    worker_token: SecretStr | None = Field(
        default=None, description="The service's worker token (INTELLIPERF_WORKER_TOKEN on the service)"
    )
    write_retry_s: float = Field(
        default=3600.0,
        gt=0,
        description="How long a call the service cannot answer (down, restarting, its database away) is "
        "retried, with backoff, before the worker gives the job up to the service's reaper",
    )
    executor: Literal["auto", "container", "local"] = Field(
        default="auto",
        description="Where the engine runs: a container (docker SDK), a local subprocess, or a "
        "container when a Docker engine answers and has the worker image",
    )
    jobs_dir: Path | None = Field(
        default=None,
        description="Where each job's scratch folder goes (default: the system's temporary folder). A "
        "worker that runs in a container and starts job containers through the host's engine needs a "
        "folder mounted at the same path on the host",
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
    reuse_counters: bool = Field(
        default=True,
        description="Reuse counters by code hash: a job gets its repository's counter entries from the "
        "service, and one on the base branch it tracks sends its new ones back (False: neither)",
    )


@cache
def get_worker_settings() -> WorkerSettings:
    return WorkerSettings()

"""The worker API's messages: what a GPU node and the service say to each other (service/api/worker_api.py,
worker/service_client.py). A worker holds no database URL and no secret key; it is given a job's spec,
source and secrets when it claims the job, and only the run that claimed a job may write its events and
result.

A claim names the delivery that brought the job: the secret the service put in that job's broker message
(``ClaimRequest.delivery``). The worker token alone claims nothing, so a process that learned it still
cannot take a job it was not delivered. Events go in numbered batches (``EventsIn.batch``), so a batch sent
again after a lost answer is stored once.

Counter entries (intelliperf.engine.counter_store) live in the service, per repository: a worker lists and
downloads its job's repository's entries before the job (``CounterEntries``), and uploads what a job that
publishes (``JobSpec.publishes_counters``: cloned from the base branch it tracks, never an uploaded
archive) measured, one entry per request (``CounterEntryStored``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from intelliperf.contract.counters import COUNTER_KEY
from intelliperf.contract.job import JobSpec

__all__ = [
    "MAX_EVENTS_PER_BATCH",
    "MAX_EVENT_CHARS",
    "ClaimRequest",
    "ClaimedJob",
    "CounterEntries",
    "CounterEntryInfo",
    "CounterEntryStored",
    "EventIn",
    "EventsIn",
    "JobResult",
    "ReproducerStored",
    "WorkerBeat",
]

MAX_EVENTS_PER_BATCH = 1000
MAX_EVENT_CHARS = 16_384
"""A longer log line is cut to this length by the worker (with a note of what was cut); the API refuses
longer ones, so one runaway line cannot make a batch too large to store."""


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WorkerBeat(_Message):
    run_id: str = Field(min_length=1, max_length=64, description="This worker process (one per start)")
    hostname: str = Field(max_length=255)
    queues: list[str]
    gpu_vendor: str | None = None
    gpu_name: str | None = None
    gpu_arch: str | None = None
    gpu_memory_bytes: int | None = Field(default=None, ge=0)
    current_job: str | None = None


class ClaimRequest(_Message):
    worker: str = Field(min_length=1, max_length=200)
    run_id: str = Field(min_length=1, max_length=64)
    delivery: str = Field(
        min_length=16,
        max_length=128,
        description="The secret of the broker message that brought the job (one per dispatch); never logged",
        repr=False,
    )


class ClaimedJob(_Message):
    id: str
    spec: JobSpec
    source: Literal["archive", "git"]
    repository: str | None = Field(
        default=None,
        description="owner/name the service attributes the job to (None for a job without one): the "
        "counter entries the job gets and publishes are that repository's",
    )
    secrets: dict[str, str] = Field(
        default_factory=dict, description="Sent once, with the claim; never logged"
    )
    secrets_error: str | None = Field(default=None, description="Why the job's secrets could not be read")

    def __repr_args__(self) -> Any:  # the secrets' values never reach a log through repr
        return [(k, v if k != "secrets" else sorted(self.secrets)) for k, v in super().__repr_args__()]


class EventIn(_Message):
    kind: Literal["stage", "log"]
    message: str = Field(max_length=MAX_EVENT_CHARS)
    stage: str | None = Field(default=None, max_length=64)


class EventsIn(_Message):
    run_id: str = Field(min_length=1, max_length=64)
    batch: int = Field(
        ge=0,
        lt=2**31,
        description="This run's sequence number of the batch: a batch sent again is stored once",
    )
    events: list[EventIn] = Field(min_length=1, max_length=MAX_EVENTS_PER_BATCH)


class JobResult(_Message):
    run_id: str = Field(min_length=1, max_length=64)
    status: Literal["succeeded", "failed", "cancelled"]
    outcome: str
    error: str | None = None
    report: dict[str, Any] | None = None
    diff: str | None = None
    summary: str | None = None
    speedup: float | None = None
    pr_url: str | None = None


class ReproducerStored(_Message):
    """What the service says once it stored a job's reproducer."""

    url: str = Field(description="Where the job's owner downloads it (GET, with their token)")
    bytes: int = Field(ge=0)


class CounterEntryInfo(_Message):
    key: str = Field(pattern=COUNTER_KEY)
    bytes: int = Field(ge=0)


class CounterEntries(_Message):
    """The entries of a job's repository, newest first (none for a job without a repository)."""

    entries: list[CounterEntryInfo]


class CounterEntryStored(_Message):
    """What the service says once it stored an entry a job published."""

    key: str = Field(pattern=COUNTER_KEY)
    bytes: int = Field(ge=0)
    dropped: int = Field(
        ge=0, description="The repository's oldest entries dropped to keep it within counter_store_max_bytes"
    )

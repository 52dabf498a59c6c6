"""Which GPU queues the fleet serves, as the workers' heartbeats tell: known (every queue a registered
worker consumes) and live (consumed by a worker that reported within ``worker_stale_s``).

Submission refuses a job for a queue no registered worker has consumed within ``worker_forget_s`` (an AMD
job on an NVIDIA fleet would wait forever; a retired architecture stops being served once its workers are
forgotten), and a job whose ``gpu.min_memory_gib`` exceeds every such worker's GPU on its queue. A queue
whose workers are all gone but not forgotten is accepted, since they may be restarting, and the dashboard
marks its queued jobs. The submit path reads it through ``FleetCache``, so a burst of
submissions costs one query every few seconds, not one each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.api.schemas import WorkerOut
from service.auth import Principal
from service.db.models import Job, Worker, utcnow

__all__ = ["FORGET_AFTER_S", "Fleet", "FleetCache", "fleet_of", "worker_rows"]

FORGET_AFTER_S = 7 * 24 * 3600.0
"""A worker not heard from for this long no longer counts as serving its queues."""


@dataclass(frozen=True)
class Fleet:
    known: frozenset[str]
    live: frozenset[str]
    memory: Mapping[str, int] = field(default_factory=dict)
    """Per queue, the largest GPU memory (bytes) of a known worker on it that reported one."""

    @classmethod
    def of(cls, workers: Iterable[tuple[Iterable[str], bool]], memory: Iterable[int | None] = ()) -> Fleet:
        """From each worker's queues and whether it is alive (its heartbeat within worker_stale_s), and
        optionally each one's GPU memory in bytes (None: no GPU or not reported)."""
        rows = [(list(queues), alive) for queues, alive in workers]
        largest: dict[str, int] = {}
        for (queues, _), size in zip(rows, memory, strict=False):
            for queue in queues:
                if size is not None:
                    largest[queue] = max(size, largest.get(queue, 0))
        return cls(
            known=frozenset(queue for queues, _ in rows for queue in queues),
            live=frozenset(queue for queues, alive in rows if alive for queue in queues),
            memory=largest,
        )

    def refusal(self, queue: str, min_memory_gib: float | None = None) -> str | None:
        """Why a job for ``queue`` (needing ``min_memory_gib``) would never run, or None. With no worker
        registered yet nothing is known, so nothing is refused; nor is a memory need no worker reported
        against."""
        if not self.known:
            return None
        if queue not in self.known:
            return (
                f"no worker serves the GPU queue {queue}: the workers registered with this service serve "
                f"{', '.join(sorted(self.known))}"
            )
        largest = self.memory.get(queue)
        if min_memory_gib is not None and largest is not None and largest < min_memory_gib * 2**30:
            return (
                f"gpu.min_memory_gib is {min_memory_gib:g}, but the largest GPU of a worker on {queue} has "
                f"{largest / 2**30:.1f} GiB"
            )
        return None


def fleet_of(session: Session, worker_stale_s: float, worker_forget_s: float = FORGET_AFTER_S) -> Fleet:
    now = utcnow()
    stale, forgotten = now - timedelta(seconds=worker_stale_s), now - timedelta(seconds=worker_forget_s)
    rows = session.execute(
        select(Worker.queues, Worker.last_heartbeat, Worker.gpu_memory_bytes).where(
            Worker.last_heartbeat >= forgotten
        )
    ).all()
    return Fleet.of(((queues, seen >= stale) for queues, seen, _ in rows), (size for _, _, size in rows))


class FleetCache:
    def __init__(
        self, worker_stale_s: float, ttl_s: float = 5.0, worker_forget_s: float = FORGET_AFTER_S
    ) -> None:
        self.worker_stale_s = worker_stale_s
        self.worker_forget_s = worker_forget_s
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._fleet: Fleet | None = None
        self._read_at = 0.0

    def get(self, session: Session, *, fresh: bool = False) -> Fleet:
        with self._lock:
            if fresh or self._fleet is None or time.monotonic() - self._read_at > self.ttl_s:
                self._fleet = fleet_of(session, self.worker_stale_s, self.worker_forget_s)
                self._read_at = time.monotonic()
            return self._fleet

    def refusal(self, session: Session, queue: str, min_memory_gib: float | None = None) -> str | None:
        """Why a job for ``queue`` would never run, or None. A refusal from the cached fleet is checked
        against a fresh read first: a worker that registered within the cache's lifetime serves it."""
        if self.get(session).refusal(queue, min_memory_gib) is None:
            return None
        return self.get(session, fresh=True).refusal(queue, min_memory_gib)


def worker_rows(session: Session, principal: Principal, worker_stale_s: float) -> list[WorkerOut]:
    """Every worker as the API and the dashboard show it: its current job's id only to a principal that may
    see that job's repository (busy either way), alive when heard from within ``worker_stale_s``."""
    stale = utcnow() - timedelta(seconds=worker_stale_s)
    workers = session.scalars(select(Worker).order_by(Worker.name)).all()
    busy = {w.current_job for w in workers if w.current_job}
    repositories = dict(session.execute(select(Job.id, Job.repository).where(Job.id.in_(busy))).all())
    visible = {job for job, repository in repositories.items() if principal.may_access(repository)}
    own = ("alive", "current_job", "busy")
    return [
        WorkerOut(
            **{name: getattr(w, name) for name in WorkerOut.model_fields if name not in own},
            current_job=w.current_job if w.current_job in visible else None,
            busy=w.current_job is not None,
            alive=w.last_heartbeat >= stale,
        )
        for w in workers
    ]

"""Which GPU queues the fleet serves, as the workers' heartbeats tell: known (every queue a registered
worker consumes) and live (consumed by a worker that reported within ``worker_stale_s``).

Submission refuses a job for a queue no registered worker has ever consumed (an AMD job on an NVIDIA
fleet would wait forever); a queue whose workers are all gone is accepted, since they may be restarting,
and the dashboard marks its queued jobs. The submit path reads it through ``FleetCache``, so a burst of
submissions costs one query every few seconds, not one each.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.models import Worker, utcnow

__all__ = ["Fleet", "FleetCache", "fleet_of"]


@dataclass(frozen=True)
class Fleet:
    known: frozenset[str]
    live: frozenset[str]

    @classmethod
    def of(cls, workers: Iterable[tuple[Iterable[str], bool]]) -> Fleet:
        """From each worker's queues and whether it is alive (its heartbeat within worker_stale_s)."""
        rows = [(list(queues), alive) for queues, alive in workers]
        return cls(
            known=frozenset(queue for queues, _ in rows for queue in queues),
            live=frozenset(queue for queues, alive in rows if alive for queue in queues),
        )

    def refusal(self, queue: str) -> str | None:
        """Why a job for ``queue`` would never run, or None. With no worker registered yet nothing is known,
        so nothing is refused."""
        if not self.known or queue in self.known:
            return None
        return (
            f"no worker serves the GPU queue {queue}: the workers registered with this service serve "
            f"{', '.join(sorted(self.known))}"
        )


def fleet_of(session: Session, worker_stale_s: float) -> Fleet:
    stale = utcnow() - timedelta(seconds=worker_stale_s)
    rows = session.execute(select(Worker.queues, Worker.last_heartbeat)).all()
    return Fleet.of((queues, seen >= stale) for queues, seen in rows)


class FleetCache:
    def __init__(self, worker_stale_s: float, ttl_s: float = 5.0) -> None:
        self.worker_stale_s = worker_stale_s
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._fleet: Fleet | None = None
        self._read_at = 0.0

    def get(self, session: Session, *, fresh: bool = False) -> Fleet:
        with self._lock:
            if fresh or self._fleet is None or time.monotonic() - self._read_at > self.ttl_s:
                self._fleet = fleet_of(session, self.worker_stale_s)
                self._read_at = time.monotonic()
            return self._fleet

    def refusal(self, session: Session, queue: str) -> str | None:
        """Why a job for ``queue`` would never run, or None. A refusal from the cached fleet is checked
        against a fresh read first: a worker that registered within the cache's lifetime serves it."""
        if self.get(session).refusal(queue) is None:
            return None
        return self.get(session, fresh=True).refusal(queue)

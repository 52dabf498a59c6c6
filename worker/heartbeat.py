"""A worker's presence in the database: who it is, its GPU, its queues, its current job, every few seconds."""

from __future__ import annotations

import logging
import socket
import threading
import uuid

from service.db.models import Worker, utcnow
from service.db.session import Database
from worker.gpu import GpuInfo

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)


class Heartbeat:
    """``run_id`` names this process: a worker restarted under the same name gets a new one, so the service
    can tell that the old process's job died with it."""

    def __init__(
        self, db: Database, name: str, queues: list[str], gpu: GpuInfo | None, interval_s: float
    ) -> None:
        self.db = db
        self.name = name
        self.queues = queues
        self.gpu = gpu
        self.interval_s = interval_s
        self.current_job: str | None = None
        self.run_id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        with self.db.session() as session:
            row = session.get(Worker, self.name)
            if row is None:
                row = Worker(
                    name=self.name, hostname=socket.gethostname(), started_at=utcnow(), queues=self.queues
                )
                session.add(row)
            if row.run_id != self.run_id:  # this process's first beat
                row.run_id, row.started_at, row.hostname = self.run_id, utcnow(), socket.gethostname()
            row.queues = self.queues
            row.gpu_vendor = self.gpu.vendor if self.gpu else None
            row.gpu_name = self.gpu.name if self.gpu else None
            row.gpu_arch = self.gpu.arch if self.gpu else None
            row.gpu_memory_bytes = self.gpu.memory_bytes if self.gpu else None
            row.current_job = self.current_job
            row.last_heartbeat = utcnow()

    def set_job(self, job_id: str | None) -> None:
        self.current_job = job_id
        self._safe_beat()

    def _safe_beat(self) -> None:
        try:
            self.beat()
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)

    def start(self) -> None:
        self._safe_beat()
        self._thread = threading.Thread(target=self._loop, name="intelliperf-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._safe_beat()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.current_job = None
        self._safe_beat()

"""A worker's presence at the service: who it is, its GPU, its queues, its current job, every few seconds."""

from __future__ import annotations

import logging
import socket
import threading
import uuid

from intelliperf.contract.worker import WorkerBeat
from worker.gpu import GpuInfo
from worker.service_client import ServiceClient

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.5


class Heartbeat:
    """``run_id`` names this process: a worker restarted under the same name gets a new one, so the service
    can tell that the old process's job died with it."""

    def __init__(
        self, client: ServiceClient, name: str, queues: list[str], gpu: GpuInfo | None, interval_s: float
    ) -> None:
        self.client = client
        self.name = name
        self.queues = queues
        self.gpu = gpu
        self.interval_s = interval_s
        self.current_job: str | None = None
        self.run_id = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        gpu = self.gpu
        self.client.heartbeat(
            self.name,
            WorkerBeat(
                run_id=self.run_id,
                hostname=socket.gethostname(),
                queues=self.queues,
                gpu_vendor=gpu.vendor if gpu else None,
                gpu_name=gpu.name if gpu else None,
                gpu_arch=gpu.arch if gpu else None,
                gpu_memory_bytes=gpu.memory_bytes if gpu else None,
                current_job=self.current_job,
            ),
        )

    def set_job(self, job_id: str | None) -> None:
        self.current_job = job_id
        self._safe_beat()

    def _safe_beat(self) -> bool:
        try:
            self.beat()
        except Exception as exc:
            log.warning("heartbeat failed: %s", exc)
            return False
        return True

    def start(self) -> None:
        self._safe_beat()
        self._thread = threading.Thread(target=self._loop, name="intelliperf-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        """A beat every ``interval_s``; after a failed one, again sooner (RETRY_FIRST_S, doubling up to the
        interval), so the service hears this worker within seconds of coming back from an outage."""
        wait = self.interval_s
        while not self._stop.wait(wait):
            if self._safe_beat():
                wait = self.interval_s
            else:
                retry = RETRY_FIRST_S if wait >= self.interval_s else wait * 2
                wait = min(retry, self.interval_s)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.current_job = None
        self._safe_beat()

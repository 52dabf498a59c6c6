"""The Celery worker: ``celery -A worker.app worker -P solo -Q gpu.nvidia.sm90,gpu.nvidia.any``.

One process per GPU with the solo pool (CUDA and fork do not mix); ``intelliperf worker`` starts them.
``acks_late`` with prefetch 1: a job's message is acknowledged when the job has finished, so a worker
killed mid-job leaves it to the broker and to the service's reaper, and the claim keeps a redelivered
message from running a job twice.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from celery.signals import worker_ready, worker_shutdown

from service.db.session import Database
from service.queue import RUN_JOB, make_celery
from service.secrets import SecretBox
from service.settings import get_service_settings
from worker.container import executor_for
from worker.gpu import GpuInfo, detect_gpus, queues_for
from worker.heartbeat import Heartbeat
from worker.runner import JobRunner

__all__ = ["celery", "run_job"]

log = logging.getLogger(__name__)

settings = get_service_settings()
celery = make_celery(settings)
_runtime: dict[str, Any] = {}


def _gpu() -> GpuInfo | None:
    index = os.environ.get("INTELLIPERF_WORKER_GPU_INDEX")
    if index is None:
        return None
    return next((gpu for gpu in detect_gpus() if gpu.index == int(index)), None)


def worker_name() -> str:
    return os.environ.get("INTELLIPERF_WORKER_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def _runner() -> JobRunner:
    if "runner" not in _runtime:
        db = Database(settings.resolved_database_url)
        gpu = _gpu()
        heartbeat = Heartbeat(db, worker_name(), queues_for(gpu), gpu, settings.heartbeat_s)
        _runtime["heartbeat"] = heartbeat
        _runtime["runner"] = JobRunner(
            db,
            executor_for(settings),
            worker_name(),
            heartbeat=heartbeat,
            time_limit_s=settings.job_time_limit_s,
            secret_box=SecretBox(settings.secret_key) if settings.secret_key else None,
        )
    runner: JobRunner = _runtime["runner"]
    return runner


@worker_ready.connect
def _start_heartbeat(sender: Any = None, **_: Any) -> None:
    _runner()
    heartbeat: Heartbeat = _runtime["heartbeat"]
    if sender is not None:  # the queues this worker really consumes (-Q), which the service shows
        queues = sender.app.amqp.queues
        heartbeat.queues = sorted(queues.consume_from or queues)
    heartbeat.start()


@worker_shutdown.connect
def _stop_heartbeat(**_: Any) -> None:
    if "heartbeat" in _runtime:
        _runtime["heartbeat"].stop()


@celery.task(name=RUN_JOB, acks_late=True, ignore_result=True)
def run_job(job_id: str) -> str:
    """Idempotent: a job that is not queued any more (taken, finished, cancelled) is skipped."""
    return _runner().run(job_id)

"""The Celery worker: ``celery -A worker.app worker -P solo -Q gpu.nvidia.sm90,gpu.nvidia.any``.

It needs the broker (INTELLIPERF_BROKER_URL), the service (INTELLIPERF_SERVICE_URL) and the worker token
(INTELLIPERF_WORKER_TOKEN); no database and no secret key (worker.settings).

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

from intelliperf.jobqueue import RUN_JOB, make_celery
from worker.container import executor_for
from worker.gpu import GpuInfo, detect_gpus, queues_for
from worker.heartbeat import Heartbeat
from worker.runner import JobRunner
from worker.service_client import ServiceClient
from worker.settings import get_worker_settings

__all__ = ["celery", "run_job"]

log = logging.getLogger(__name__)

settings = get_worker_settings()
celery = make_celery(settings)
_runtime: dict[str, Any] = {}


def _gpu() -> GpuInfo | None:
    """The GPU `intelliperf worker` started this process for (each vendor numbers its GPUs from 0)."""
    index = os.environ.get("INTELLIPERF_WORKER_GPU_INDEX")
    if index is None:
        return None
    vendor = os.environ.get("INTELLIPERF_WORKER_GPU_VENDOR", "nvidia")
    return next((gpu for gpu in detect_gpus() if gpu.index == int(index) and gpu.vendor == vendor), None)


def worker_name() -> str:
    return os.environ.get("INTELLIPERF_WORKER_NAME") or f"{socket.gethostname()}-{os.getpid()}"


def _runner() -> JobRunner:
    if "runner" not in _runtime:
        token = settings.worker_token.get_secret_value() if settings.worker_token else None
        service = ServiceClient(settings.service_url, token, retry_s=settings.write_retry_s)
        gpu = _gpu()
        heartbeat = Heartbeat(service, worker_name(), queues_for(gpu), gpu, settings.heartbeat_s)
        _runtime["heartbeat"] = heartbeat
        _runtime["runner"] = JobRunner(
            service,
            executor_for(settings),
            worker_name(),
            heartbeat=heartbeat,
            time_limit_s=settings.job_time_limit_s,
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

"""The Celery worker: ``celery -A worker.app worker -P solo -Q gpu.nvidia.sm90,gpu.nvidia.any``.

It needs the broker (INTELLIPERF_BROKER_URL), the service (INTELLIPERF_SERVICE_URL) and the worker token
(INTELLIPERF_WORKER_TOKEN); no database and no secret key (worker.settings).

One process per GPU with the solo pool (CUDA and fork do not mix); ``intelliperf worker`` starts them.
``acks_late`` with prefetch 1: a job's message is acknowledged when the job has finished, so a worker
killed mid-job leaves it to the broker and to the service's reaper, and the claim keeps a redelivered
message from running a job twice. A message carries the job's id and its delivery secret, which the claim
names (service.deliveries).

At start the process marks itself not dumpable (``PR_SET_DUMPABLE``), so a job running as the same
unprivileged user cannot read the worker's environment or memory through /proc or ptrace (as root it
still can: run workers unprivileged, or jobs in containers), and removes the scratch folders of jobs whose
worker died (worker.scratch).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import socket
from typing import Any

from celery.signals import worker_ready, worker_shutdown

from intelliperf.jobqueue import RUN_JOB, make_celery
from worker.container import ContainerError, ContainerExecutor, executor_for
from worker.gpu import GpuInfo, detect_gpus, queues_for
from worker.heartbeat import Heartbeat
from worker.runner import JobRunner
from worker.scratch import remove_orphaned
from worker.service_client import ServiceClient
from worker.settings import get_worker_settings

__all__ = ["celery", "run_job"]

log = logging.getLogger(__name__)

settings = get_worker_settings()
celery = make_celery(settings)
_runtime: dict[str, Any] = {}
PR_SET_DUMPABLE = 4


def _not_dumpable() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


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
            work_dir=settings.jobs_dir,
            time_limit_s=settings.job_time_limit_s,
            github_hosts=settings.github_hosts,
            reuse_counters=settings.reuse_counters,
        )
    runner: JobRunner = _runtime["runner"]
    return runner


@worker_ready.connect
def _start_heartbeat(sender: Any = None, **_: Any) -> None:
    _not_dumpable()
    runner = _runner()
    remove_orphaned(runner.work_dir)
    if isinstance(runner.executor, ContainerExecutor):
        try:
            runner.executor.remove_orphaned()
        except ContainerError as exc:
            log.warning("could not look for containers of dead workers: %s", exc)
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
def run_job(job_id: str, delivery: str | None = None) -> str:
    """Idempotent: a job that is not queued any more (taken, finished, cancelled) is skipped, and so is a
    message without a delivery the service knows."""
    if delivery is None:
        log.warning("job %s: a message without a delivery (sent before deliveries existed): skipped", job_id)
        return "skipped"
    return _runner().run(job_id, delivery)

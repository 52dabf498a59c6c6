"""The Celery app both sides share: the service publishes job ids, workers consume them.

One queue per GPU kind (``gpu.nvidia.sm90``; ``gpu.nvidia.any`` for jobs that name no architecture).
Messages carry only the job id: the database holds the job. Jobs run for hours with ``acks_late``, so
the broker's visibility timeout must outlast the longest job, or Redis hands the message to a second
worker while the first still runs (the claim in service.jobs makes that harmless, but wasteful).
"""

from __future__ import annotations

from celery import Celery

from service.settings import ServiceSettings

__all__ = ["RUN_JOB", "celery_priority", "make_celery"]

RUN_JOB = "intelliperf.run_job"


def celery_priority(priority: int) -> int:
    """The API's priority (0 lowest .. 9 highest) as Celery's Redis priority (0 is served first)."""
    return 9 - max(0, min(9, priority))


def make_celery(settings: ServiceSettings) -> Celery:
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

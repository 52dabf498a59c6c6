"""Jobs the fleet cannot run: a real worker process registers what it consumes; the API refuses a job
for a queue no registered worker serves, with the reason, and the dashboard marks queued jobs whose
workers are all gone. On SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from service.db.migrate import upgrade
from service.db.models import Worker, utcnow
from service.db.session import Database
from service.fleet import fleet_of
from service.settings import ServiceSettings
from tests.service.conftest import ADMIN, celery_worker, serve
from tests.service.test_dashboard import login, spec

NVIDIA_JOB = spec("acme/kernels")
AMD_JOB = {**NVIDIA_JOB, "gpu": {"vendor": "amd"}}
HOPPER_JOB = {**NVIDIA_JOB, "gpu": {"arch": "sm_90"}}


def test_a_job_no_registered_worker_serves_is_refused_at_submit(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    settings = settings_for(database_url, fleet_cache_s=0.0)  # each submission reads the fleet anew
    upgrade(settings.resolved_database_url)
    with serve(settings) as live:
        with live.client() as client:  # no worker has registered: nothing is known, nothing refused
            assert client.post("/v1/jobs", json=AMD_JOB).status_code == 201
        worker = celery_worker(settings, "w-any", tmp_path / "worker.log", queues="gpu.nvidia.any")
        with worker, live.client() as client:
            refused = client.post("/v1/jobs", json=AMD_JOB)
            hopper = client.post("/v1/jobs", json=HOPPER_JOB)
            served = client.post("/v1/jobs", json=NVIDIA_JOB)
    assert refused.status_code == 422, refused.text
    (problem,) = refused.json()["detail"]
    assert problem["loc"] == ["body", "gpu"]
    assert problem["msg"] == (
        "no worker serves the GPU queue gpu.amd.any: the workers registered with this service serve "
        "gpu.nvidia.any"
    )
    assert hopper.status_code == 422 and "gpu.nvidia.sm90" in hopper.text
    assert served.status_code == 201 and served.json()["queue"] == "gpu.nvidia.any"


def test_a_worker_that_registers_within_the_cache_lifetime_is_not_refused(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    """The fleet is cached for submissions; a refusal is checked against a fresh read, so a new worker's
    queue is served at once (benchmarks/service.py once got a 422 right after its worker registered)."""
    settings = settings_for(database_url, fleet_cache_s=3600.0)
    upgrade(settings.resolved_database_url)
    with serve(settings) as live:
        first = celery_worker(settings, "w-hopper", tmp_path / "hopper.log", queues="gpu.nvidia.sm90")
        with first, live.client() as client:
            assert client.post("/v1/jobs", json=HOPPER_JOB).status_code == 201  # caches {gpu.nvidia.sm90}
            assert client.post("/v1/jobs", json=AMD_JOB).status_code == 422
        second = celery_worker(settings, "w-any", tmp_path / "any.log", queues="gpu.nvidia.any")
        with second, live.client() as client:
            served = client.post("/v1/jobs", json=NVIDIA_JOB)
    assert served.status_code == 201, served.text


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_dashboard_marks_queued_jobs_whose_workers_are_gone(
    settings_for: Callable[..., ServiceSettings], database_url: str
) -> None:
    settings = settings_for(database_url, worker_stale_s=1.0)
    upgrade(settings.resolved_database_url)
    database = Database(settings.resolved_database_url)
    with database.session() as session:
        session.add(Worker(name="w-old", hostname="h", queues=["gpu.nvidia.sm90", "gpu.nvidia.any"]))
    with serve(settings, dispatch=False) as live:
        with live.client() as client:
            job = client.post("/v1/jobs", json=HOPPER_JOB).json()
        time.sleep(1.5)  # the worker's last heartbeat is now older than worker_stale_s
        with database.session() as session:
            fleet = fleet_of(session, settings.worker_stale_s)
        with login(live, ADMIN) as browser:
            page = browser.get("/").text
    database.dispose()
    assert fleet.known == {"gpu.nvidia.sm90", "gpu.nvidia.any"} and not fleet.live
    row = page[page.index(f'data-job="{job["id"]}"') :]
    row = row[: row.index("</tr>")]
    assert "gpu.nvidia.sm90" in row and "no worker" in row


def test_forgotten_workers_and_too_little_gpu_memory_are_refused_at_submit(
    settings_for: Callable[..., ServiceSettings], database_url: str
) -> None:
    """A retired architecture stops being served once its last worker is forgotten (worker_forget_s), and a
    job asking for more GPU memory than any worker on its queue reported is refused with both numbers."""
    settings = settings_for(database_url, fleet_cache_s=0.0, worker_forget_s=3600.0)
    upgrade(settings.resolved_database_url)
    database = Database(settings.resolved_database_url)
    long_ago = utcnow() - timedelta(hours=2)
    with database.session() as session:
        session.add(
            Worker(
                name="h100",
                hostname="h",
                queues=["gpu.nvidia.sm90", "gpu.nvidia.any"],
                gpu_memory_bytes=80 * 2**30,
            )
        )
        session.add(Worker(name="v100", hostname="h", queues=["gpu.nvidia.sm70"], last_heartbeat=long_ago))
    database.dispose()
    big = {**HOPPER_JOB, "gpu": {"arch": "sm_90", "min_memory_gib": 120}}
    fits = {**HOPPER_JOB, "gpu": {"arch": "sm_90", "min_memory_gib": 64}}
    volta = {**NVIDIA_JOB, "gpu": {"arch": "sm_70"}}
    with serve(settings, dispatch=False) as live, live.client() as client:
        too_big, fitting, retired = (client.post("/v1/jobs", json=job) for job in (big, fits, volta))
    assert too_big.status_code == 422
    assert too_big.json()["detail"][0]["msg"] == (
        "gpu.min_memory_gib is 120, but the largest GPU of a worker on gpu.nvidia.sm90 has 80.0 GiB"
    )
    assert fitting.status_code == 201, fitting.text
    assert retired.status_code == 422 and "no worker serves the GPU queue gpu.nvidia.sm70" in retired.text

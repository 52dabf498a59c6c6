"""A worker process advertises the GPU it was given and the queues it really consumes."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from service.db.models import Worker
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import celery_worker, serve
from tests.worker.test_gpu_and_source import SMI_TWO_GPUS, fake_smi


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_worker_advertises_its_gpu_and_the_queues_it_consumes(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    from service.db.migrate import upgrade

    settings = settings_for(database_url)
    upgrade(settings.resolved_database_url)
    path = f"{fake_smi(tmp_path / 'bin', SMI_TWO_GPUS)}:{os.environ['PATH']}"
    env = {"PATH": path, "INTELLIPERF_WORKER_GPU_INDEX": "1"}
    queues = "gpu.nvidia.sm90"  # not its default pair: what -Q says is what it consumes
    with (
        serve(settings, dispatch=False),
        celery_worker(settings, "w-gpu1", tmp_path / "worker.log", queues=queues, extra_env=env),
    ):
        database = Database(settings.resolved_database_url)
        with database.session() as session:
            row = session.get(Worker, "w-gpu1")
            assert row is not None
            advertised = (
                row.gpu_vendor,
                row.gpu_name,
                row.gpu_arch,
                row.gpu_memory_bytes,
                sorted(row.queues),
            )
        database.dispose()
    assert advertised == (
        "nvidia",
        "NVIDIA H200",
        "sm_90",
        143771 * 2**20,
        ["gpu.nvidia.sm90"],
    )

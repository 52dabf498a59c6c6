"""A job's reproducer through the real server: the run that holds the job stores it (PUT, streamed to disk
under the service's own limit), its user downloads it (GET), and no one else does either."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import httpx
import pytest

from intelliperf.contract.worker import JobResult
from service.reproducers import reproducer_path
from service.settings import ServiceSettings
from tests.service.conftest import WORKER_TOKEN, serve
from tests.service.test_worker_api import deliver
from tests.service.test_worker_flow import submit
from worker.reproducer_archive import pack_reproducer, reproducer_paths
from worker.service_client import JobNotHeld, ServiceClient, ServiceError

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def reproducer(tmp_path: Path, payload: bytes = b"") -> Path:
    folder = tmp_path / "reproducer"
    folder.mkdir(parents=True)
    for name, data in (("reference.bin", b"R" * 4096 + payload), ("candidate.bin", b"C" * 4096)):
        (folder / name).write_bytes(data)
    (folder / "reproducer.json").write_text('{"kernel": "k", "launch": 1}\n')
    paths = reproducer_paths(folder)
    assert paths is not None
    return pack_reproducer(paths, tmp_path / "reproducer.tar.gz")


def test_the_holding_run_stores_it_and_the_jobs_user_downloads_it(
    settings: ServiceSettings, tmp_path: Path
) -> None:
    public = settings.model_copy(update={"public_url": "https://perf.example.com/"})
    with serve(public, dispatch=False) as live, live.client() as client:
        job_id = submit(client)
        assert client.get(f"/v1/jobs/{job_id}/reproducer").status_code == 404  # none yet
        tarball = reproducer(tmp_path)
        with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
            assert api.claim(job_id, "w-1", "run-1", deliver(settings, job_id)) is not None
            with pytest.raises(JobNotHeld):
                api.reproducer(job_id, "run-2", tarball)
            stored = api.reproducer(job_id, "run-1", tarball)
            api.result(job_id, JobResult(run_id="run-1", status="succeeded", outcome="diagnosed"))
        assert stored.url == f"https://perf.example.com/v1/jobs/{job_id}/reproducer"
        assert stored.bytes == tarball.stat().st_size
        downloaded = client.get(f"/v1/jobs/{job_id}/reproducer")
        assert client.get(f"/v1/jobs/{job_id}/reproducer", headers={"Authorization": ""}).status_code == 401
    assert downloaded.status_code == 200 and downloaded.headers["content-type"] == "application/gzip"
    assert downloaded.content == tarball.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(downloaded.content)) as archive:
        assert sorted(archive.getnames()) == [
            "reproducer/candidate.bin", "reproducer/reference.bin", "reproducer/reproducer.json",
        ]  # fmt: skip
    assert not [
        p for p in reproducer_path(settings.data_dir, job_id).parent.iterdir() if p.name.startswith(".")
    ]


def test_a_reproducer_over_the_limit_is_refused_and_leaves_nothing(
    settings: ServiceSettings, tmp_path: Path
) -> None:
    tarball = reproducer(tmp_path, os.urandom(64 * 1024))  # random bytes: gzip keeps their size
    limit = tarball.stat().st_size - 1
    small = settings.model_copy(update={"max_reproducer_bytes": limit})
    with serve(small, dispatch=False) as live, live.client() as client:
        job_id = submit(client)
        with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
            assert api.claim(job_id, "w-1", "run-1", deliver(settings, job_id)) is not None
            with pytest.raises(ServiceError, match=f"413.*over the service's {limit} bytes"):
                api.reproducer(job_id, "run-1", tarball)
            chunked = httpx.put(  # no Content-Length: refused as the bytes pass the limit
                f"{live.url}/v1/worker/jobs/{job_id}/reproducer",
                params={"run_id": "run-1"},
                content=iter([tarball.read_bytes()[:limit], b"more"]),
                headers={"Authorization": f"Bearer {WORKER_TOKEN}"},
            )
            assert chunked.status_code == 413, chunked.text
            fits = reproducer(tmp_path / "again")
            assert api.reproducer(job_id, "run-1", fits).bytes == fits.stat().st_size
        assert client.get(f"/v1/jobs/{job_id}/reproducer").content == fits.read_bytes()
    leftovers = [p.name for p in reproducer_path(settings.data_dir, job_id).parent.iterdir()]
    assert leftovers == [f"{job_id}.tar.gz"]


def test_the_worker_token_alone_downloads_nothing_and_stores_nothing_for_an_unknown_job(
    settings: ServiceSettings, tmp_path: Path
) -> None:
    with serve(settings, dispatch=False) as live, live.client() as client:
        job_id = submit(client)
        worker = {"Authorization": f"Bearer {WORKER_TOKEN}"}
        assert httpx.get(f"{live.url}/v1/jobs/{job_id}/reproducer", headers=worker).status_code == 401
        with (
            ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api,
            pytest.raises(ServiceError, match="404"),
        ):
            api.reproducer("0" * 32, "run-1", reproducer(tmp_path))
        assert client.get("/v1/jobs/../reproducer").status_code == 404

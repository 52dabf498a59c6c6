"""The API process killed (SIGKILL) and started again while a real worker runs a job: the worker goes on
writing the job's events and result, the job runs once, and a client following the event stream resumes
with Last-Event-ID and sees every event exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from service.settings import ServiceSettings
from tests.service.conftest import ADMIN, ROOT, WORKER_TOKEN, celery_worker, free_port, wait_for
from tests.service.test_worker_flow import REPLAY_SPEC, recorded_example_archive

HEADERS = {"Authorization": f"Bearer {ADMIN}"}


@contextmanager
def api_process(settings: ServiceSettings, port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    env |= {
        "INTELLIPERF_DATA_DIR": str(settings.data_dir),
        "INTELLIPERF_DATABASE_URL": settings.resolved_database_url,
        "INTELLIPERF_ADMIN_TOKEN": ADMIN,
        "INTELLIPERF_WORKER_TOKEN": WORKER_TOKEN,
        "INTELLIPERF_HEARTBEAT_S": str(settings.heartbeat_s),
        "INTELLIPERF_WORKER_STALE_S": str(settings.worker_stale_s),
        "INTELLIPERF_DISPATCH_SWEEP_S": str(settings.dispatch_sweep_s),
        "INTELLIPERF_EVENTS_POLL_S": "0.05",
        "PYTHONPATH": str(ROOT),
    }
    argv = [sys.executable, "-m", "service.api.server", "--port", str(port), "--log-level", "warning"]
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=sink, stderr=sink)
    try:
        wait_for(lambda: _answers(port) or process.poll() is not None, timeout=60)
        assert process.poll() is None, log.read_text()[-2000:]
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def follow(url: str, job_id: str, seen: list[tuple[int, str, str]], reconnects: list[int]) -> None:
    """Read the job's event stream to its end, reconnecting with Last-Event-ID whenever the server goes."""
    last: int | None = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        headers = HEADERS | ({"Last-Event-ID": str(last)} if last is not None else {})
        try:
            with httpx.stream("GET", f"{url}/v1/jobs/{job_id}/events", headers=headers, timeout=30) as stream:
                event_id, kind = None, ""
                for line in stream.iter_lines():
                    if line.startswith("id: "):
                        event_id = int(line.removeprefix("id: "))
                    elif line.startswith("event: "):
                        kind = line.removeprefix("event: ")
                    elif line.startswith("data: "):
                        if kind == "end":
                            return
                        assert event_id is not None
                        seen.append((event_id, kind, line.removeprefix("data: ")))
                        last = event_id
        except (httpx.TransportError, httpx.RemoteProtocolError):
            pass
        reconnects.append(len(seen))
        time.sleep(0.2)


def test_the_api_killed_and_restarted_mid_job_loses_no_event_and_no_result(tmp_path: Path) -> None:
    settings = ServiceSettings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'service.db'}",
        admin_token=ADMIN,  # type: ignore[arg-type]
        worker_token=WORKER_TOKEN,  # type: ignore[arg-type]
        heartbeat_s=0.5,
        worker_stale_s=30.0,
        dispatch_sweep_s=0.5,
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    seen: list[tuple[int, str, str]] = []
    reconnects: list[int] = []
    spec = {**REPLAY_SPEC, "build_command": "sleep 4; echo built"}
    with (
        api_process(settings, port, tmp_path / "api-1.log") as first,
        celery_worker(settings, "w-restart", tmp_path / "worker.log", service_url=url),
    ):
        response = httpx.post(
            f"{url}/v1/jobs",
            headers=HEADERS,
            data={"spec": json.dumps(spec)},
            files={"archive": ("p.tar.gz", recorded_example_archive(), "application/gzip")},
        )
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]
        reader = threading.Thread(target=follow, args=(url, job_id, seen, reconnects), daemon=True)
        reader.start()
        wait_for(lambda: any('"stage": "build"' in data for _, _, data in seen), timeout=60)
        first.send_signal(signal.SIGKILL)
        first.wait()
        time.sleep(2.0)  # the worker goes on without the API (its events wait): the build is still running
        with api_process(settings, port, tmp_path / "api-2.log"):
            reader.join(timeout=120)
            assert not reader.is_alive(), "the event stream never ended"
            job = httpx.get(f"{url}/v1/jobs/{job_id}", headers=HEADERS).json()
            with httpx.stream(
                "GET", f"{url}/v1/jobs/{job_id}/events", params={"follow": "false"}, headers=HEADERS
            ) as stream:
                stored = [int(line[4:]) for line in stream.iter_lines() if line.startswith("id: ")]
    assert (job["status"], job["outcome"], job["runs"]) == ("succeeded", "diagnosed", 1), job
    assert reconnects, "the reader never lost its connection: the API was not killed under it"
    ids = [event_id for event_id, _, _ in seen]
    assert ids == sorted(set(ids)), "an event was delivered twice or out of order"
    assert ids == stored, "the reader missed an event the job recorded"
    stages = {json.loads(data).get("stage") for _, _, data in seen}
    assert {"build", "timing", "counters", "diagnose"} <= stages

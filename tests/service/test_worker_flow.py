"""Jobs through the whole stack: the API, the database, a broker, real Celery worker processes, the engine.

The engine diagnoses a profile recorded on the GPU machine (``replay``), so no GPU is needed; a
``build_command`` of ``sleep`` makes a job that runs for as long as a test needs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from intelliperf.jobqueue import FILESYSTEM_BROKER
from service.db.migrate import upgrade
from service.settings import ServiceSettings
from tests.service.conftest import (
    LiveService,
    celery_worker,
    free_port,
    recorded_example_archive,
    serve,
    wait_for,
)

REPLAY_SPEC = {
    "applications": [{"command": "./bin/transpose"}],
    "formula": "diagnoseOnly",
    "replay": "profile",
}


def submit(client: httpx.Client, spec: dict[str, object] | None = None, archive: bytes | None = None) -> str:
    response = client.post(
        "/v1/jobs",
        data={"spec": json.dumps(spec or REPLAY_SPEC)},
        files={"archive": ("project.tar.gz", archive or recorded_example_archive(), "application/gzip")},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def job(client: httpx.Client, job_id: str) -> dict[str, object]:
    return dict(client.get(f"/v1/jobs/{job_id}").json())


def finished(client: httpx.Client, job_id: str) -> Callable[[], dict[str, object] | None]:
    def check() -> dict[str, object] | None:
        state = job(client, job_id)
        return state if state["status"] in ("succeeded", "failed", "cancelled") else None

    return check


def test_a_job_runs_on_a_worker_and_streams_its_events_live(live: LiveService, tmp_path: Path) -> None:
    """Filesystem broker (the embedded default), SQLite and PostgreSQL."""
    with celery_worker(live.settings, "w-flow", tmp_path / "worker.log"), live.client() as client:
        job_id = submit(client)
        seen: list[tuple[str, str]] = []
        with client.stream("GET", f"/v1/jobs/{job_id}/events") as stream:
            kind = ""
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    seen.append((kind, line.removeprefix("data: ")))
        state = job(client, job_id)
        assert state["status"] == "succeeded", state
        assert state["outcome"] == "diagnosed"
        assert state["worker"] == "w-flow"
        stages = [json.loads(data).get("stage") for kind, data in seen if kind != "end"]
        assert stages[:3] == ["queued", "running", "source"]
        assert {"timing", "counters", "diagnose"} <= set(stages)
        assert seen[-1] == ("end", json.dumps({"status": "succeeded"}))
        report = client.get(f"/v1/jobs/{job_id}/report").json()
        present = [(d["formula"], d["kernel"]) for d in report["diagnoses"] if d["present"]]
        assert len(present) == 1 and present[0][0] == "bankConflict" and "transpose" in present[0][1]
        assert client.get(f"/v1/jobs/{job_id}/diff").status_code == 404  # diagnosis only: no rewrite
        # the embedded broker keeps all its files (messages, control) in the data folder
        assert (
            live.settings.resolved_broker_url != FILESYSTEM_BROKER
            or (live.settings.broker_folder / "control").is_dir()
        )
        workers = client.get("/v1/workers").json()
        assert [(w["name"], w["alive"], w["current_job"]) for w in workers] == [("w-flow", True, None)]


@contextmanager
def private_redis(tmp_path: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """A redis-server of this test's own (so it can be restarted), without persistence."""
    port = free_port()
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    argv += ["--dir", str(tmp_path)]
    holder: dict[str, subprocess.Popen[bytes]] = {}

    def start() -> None:
        holder["p"] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).stdout)

    def restart() -> None:
        holder["p"].kill()
        holder["p"].wait()
        start()

    if shutil.which("redis-server") is None:
        pytest.fail("redis-server is not installed")
    start()
    try:
        yield f"redis://127.0.0.1:{port}/0", restart
    finally:
        holder["p"].kill()
        holder["p"].wait()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_redis_restarted_loses_no_queued_job(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    with private_redis(tmp_path) as (broker, restart_redis):
        settings = settings_for(database_url, broker_url=broker, redispatch_after_s=3600)
        with serve(settings) as live, live.client() as client:
            job_ids = [submit(client) for _ in range(3)]
            wait_for(lambda: all(job(client, j)["dispatched_at"] for j in job_ids))
            restart_redis()  # the queue and its three messages are gone
            with celery_worker(settings, "w-after-restart", tmp_path / "worker.log"):
                states = [wait_for(finished(client, j), timeout=90) for j in job_ids]
        assert [s["status"] for s in states] == ["succeeded"] * 3  # type: ignore[index]
        assert all(s["runs"] == 1 for s in states)  # type: ignore[index]


def sleeper() -> str:
    """A sleep command no other process on the machine runs, so pgrep finds only this test's."""
    return f"sleep 60.{uuid.uuid4().int % 10**6:06d}"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_worker_killed_mid_job_gets_its_job_retried_elsewhere(live: LiveService, tmp_path: Path) -> None:
    with live.client() as client:
        with celery_worker(live.settings, "w-doomed", tmp_path / "doomed.log") as doomed:
            job_id = submit(client, {**REPLAY_SPEC, "build_command": "sleep 4"})
            wait_for(lambda: job(client, job_id)["status"] == "running", timeout=30)
            os.killpg(doomed.pid, signal.SIGKILL)
            doomed.wait()
        events_before = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
        assert "started on w-doomed" in events_before
        with celery_worker(live.settings, "w-rescuer", tmp_path / "rescuer.log"):
            state = wait_for(finished(client, job_id), timeout=90)
        assert state["status"] == "succeeded"  # type: ignore[index]
        assert state["worker"] == "w-rescuer"  # type: ignore[index]
        assert state["runs"] == 2  # type: ignore[index]
        events = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
        assert "worker w-doomed stopped sending heartbeats" in events
        assert "queued again" in events


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_a_worker_restarted_under_the_same_name_does_not_keep_the_dead_run_alive(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    """`intelliperf worker` names its processes after the host and GPU, so a restarted worker beats under
    the dead one's name: its new run id tells the service that the job it had died with it. The stale
    limit is 10 minutes here, so only the run id can have found it."""
    settings = settings_for(database_url, worker_stale_s=600.0)
    upgrade(settings.resolved_database_url)
    with serve(settings) as live, live.client() as client:
        with celery_worker(live.settings, "w-same", tmp_path / "first.log") as first:
            job_id = submit(client, {**REPLAY_SPEC, "build_command": "sleep 4"})
            wait_for(lambda: job(client, job_id)["status"] == "running", timeout=30)
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        with celery_worker(live.settings, "w-same", tmp_path / "second.log"):
            state = wait_for(finished(client, job_id), timeout=90)
        assert state["status"] == "succeeded" and state["runs"] == 2  # type: ignore[index]
        events = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
        assert "worker w-same restarted" in events and "queued again" in events
        assert "stopped sending heartbeats" not in events  # found at once, not after the stale limit


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_running_job_is_cancelled_and_its_engine_stopped(live: LiveService, tmp_path: Path) -> None:
    with celery_worker(live.settings, "w-cancel", tmp_path / "worker.log"), live.client() as client:
        command = sleeper()
        job_id = submit(client, {**REPLAY_SPEC, "build_command": command})
        wait_for(lambda: job(client, job_id)["status"] == "running", timeout=30)
        wait_for(lambda: _sleep_running(command), timeout=30)
        response = client.post(f"/v1/jobs/{job_id}/cancel")
        assert response.status_code == 202 and response.json()["cancel_requested"]
        started = time.monotonic()
        state = wait_for(finished(client, job_id), timeout=30)
        assert state["status"] == "cancelled"  # type: ignore[index]
        assert time.monotonic() - started < 15
        wait_for(lambda: not _sleep_running(command), timeout=10)
        assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 409
        # the worker goes on with the next job
        next_id = submit(client)
        assert wait_for(finished(client, next_id), timeout=60)["status"] == "succeeded"  # type: ignore[index]


def _sleep_running(command: str) -> bool:
    return subprocess.run(["pgrep", "-xf", command], capture_output=True).returncode == 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_job_over_its_time_limit_is_stopped_and_failed(live: LiveService, tmp_path: Path) -> None:
    command = sleeper()
    spec = {**REPLAY_SPEC, "build_command": command, "timeouts": {"job_s": 2}}
    with celery_worker(live.settings, "w-limit", tmp_path / "worker.log"), live.client() as client:
        job_id = submit(client, spec)
        state = wait_for(finished(client, job_id), timeout=60)
        assert (state["status"], state["outcome"]) == ("failed", "timeout")  # type: ignore[index]
        assert "time limit" in state["error"]  # type: ignore[index]
        wait_for(lambda: not _sleep_running(command), timeout=10)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_engine_failures_end_the_job_with_their_reason(live: LiveService, tmp_path: Path) -> None:
    with celery_worker(live.settings, "w-fail", tmp_path / "worker.log"), live.client() as client:
        build_fails = submit(
            client, {**REPLAY_SPEC, "build_command": "echo 'error: no such file' >&2; exit 3"}
        )
        no_folder = submit(client, {**REPLAY_SPEC, "project_directory": "missing"})
        no_profile = submit(client, {**REPLAY_SPEC, "replay": "nowhere"})
        states = [wait_for(finished(client, j), timeout=60) for j in (build_fails, no_folder, no_profile)]
    outcomes = [(s["status"], s["outcome"]) for s in states]  # type: ignore[index]
    # a replay folder that holds no recording is the spec's fault, as in the CLI (one engine entry point)
    assert outcomes == [("failed", "build_failed"), ("failed", "bad_spec"), ("failed", "bad_spec")]
    assert "no such file" in states[0]["error"]  # type: ignore[index]
    assert "missing" in states[1]["error"]  # type: ignore[index]
    assert "replay: " in states[2]["error"] and "not a recorded profile" in states[2]["error"]  # type: ignore[index]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_higher_priority_jobs_start_first_on_redis(
    settings_for: Callable[..., ServiceSettings], database_url: str, redis_url: str, tmp_path: Path
) -> None:
    settings = settings_for(database_url, broker_url=redis_url)
    with serve(settings) as live, live.client() as client:
        low = [submit_with_priority(client, 1) for _ in range(3)]
        high = [submit_with_priority(client, 9) for _ in range(2)]
        wait_for(lambda: all(job(client, j)["dispatched_at"] for j in low + high))
        with celery_worker(settings, "w-priority", tmp_path / "worker.log"):
            states = {j: wait_for(finished(client, j), timeout=90) for j in low + high}
    order = sorted(states, key=lambda j: str(states[j]["started_at"]))  # type: ignore[index]
    assert set(order[:2]) == set(high), [states[j]["priority"] for j in order]  # type: ignore[index]


def submit_with_priority(client: httpx.Client, priority: int) -> str:
    response = client.post(
        "/v1/jobs",
        params={"priority": priority},
        data={"spec": json.dumps(REPLAY_SPEC)},
        files={"archive": ("project.tar.gz", recorded_example_archive(), "application/gzip")},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])

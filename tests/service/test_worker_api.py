"""The worker API through the real server: the worker token, one run per job, the image's healthcheck."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from intelliperf.contract.worker import EventIn, JobResult, WorkerBeat
from service.db.models import utcnow
from service.db.session import Database
from service.deliveries import new_deliveries
from service.settings import ServiceSettings
from tests.service.conftest import ROOT, WORKER_TOKEN, LiveService, serve, worker_env
from tests.service.test_worker_flow import submit
from worker.service_client import JobNotHeld, NotDelivered, ServiceClient, ServiceError


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_only_the_worker_token_opens_the_worker_api(live: LiveService) -> None:
    path = "/v1/worker/jobs/x/claim"
    body = {"worker": "w", "run_id": "r", "delivery": "d" * 43}
    assert httpx.post(f"{live.url}{path}", json=body).status_code == 401
    wrong = httpx.post(f"{live.url}{path}", json=body, headers={"Authorization": "Bearer test-admin-secret"})
    assert wrong.status_code == 401 and wrong.json()["detail"] == "not the worker token"
    with ServiceClient(live.url, "not-it", retry_s=0) as api, pytest.raises(ServiceError, match="401"):
        api.claim("x", "w", "r", "d" * 43)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_service_without_a_worker_token_accepts_no_worker(settings: ServiceSettings) -> None:
    with serve(settings.model_copy(update={"worker_token": None}), dispatch=False) as live:
        refused = httpx.put(f"{live.url}/v1/worker/workers/w", json={}, headers={"Authorization": "Bearer x"})
    assert refused.status_code == 401 and "INTELLIPERF_WORKER_TOKEN" in refused.json()["detail"]


def deliver(settings: ServiceSettings, job_id: str) -> str:
    """A delivery of ``job_id``, as the dispatcher makes one for each broker message."""
    database = Database(settings.resolved_database_url)
    try:
        with database.session() as session:
            return new_deliveries(session, [job_id])[job_id]
    finally:
        database.dispose()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_only_the_run_that_claimed_a_job_writes_it(settings: ServiceSettings) -> None:
    with serve(settings, dispatch=False) as live, live.client() as client:
        job_id = submit(client)
        with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
            _one_run_writes(api, job_id, deliver(settings, job_id))
        state = client.get(f"/v1/jobs/{job_id}").json()
        events = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
    assert (state["status"], state["outcome"], state["runs"]) == ("succeeded", "diagnosed", 1)
    assert "building" in events and "dead predecessor" not in events
    assert events.count("succeeded: diagnosed") == 1


def _one_run_writes(api: ServiceClient, job_id: str, delivery: str) -> None:
    job = api.claim(job_id, "w-1", "run-1", delivery)
    assert job is not None and job.spec.formula == "diagnoseOnly" and job.secrets == {}
    assert "secrets=[]" in repr(job)
    assert api.claim(job_id, "w-2", "run-2", delivery) is None  # held by run-1
    api.events(job_id, "run-1", 0, [EventIn(kind="stage", message="building", stage="build")])
    with pytest.raises(JobNotHeld):
        api.events(job_id, "run-2", 0, [EventIn(kind="log", message="from a dead predecessor's name")])
    with pytest.raises(JobNotHeld):
        api.archive(job_id, "run-2")
    assert api.cancel_requested(job_id, "run-2")  # not its job: it stops
    assert not api.cancel_requested(job_id, "run-1")
    result = JobResult(run_id="run-1", status="succeeded", outcome="diagnosed")
    api.result(job_id, result)
    api.result(job_id, result)  # sent again after a lost answer: changes nothing
    with pytest.raises(JobNotHeld):
        api.result(job_id, result.model_copy(update={"run_id": "run-2", "status": "failed"}))
    with pytest.raises(JobNotHeld):  # the job has ended: no event of any run is stored any more
        api.events(job_id, "run-1", 1, [EventIn(kind="log", message="after the end")])


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_worker_images_healthcheck_asks_the_service(live: LiveService, tmp_path: Path) -> None:
    env = worker_env(live.settings, "w-health", live.url)
    check = [sys.executable, "-m", "worker.health"]
    before = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    beat = WorkerBeat(run_id="r", hostname=socket.gethostname(), queues=["gpu.nvidia.any"])
    with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
        api.heartbeat("w-health", beat)
    after = subprocess.run(check, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    down = subprocess.run(
        check,
        cwd=ROOT,
        env=env | {"INTELLIPERF_SERVICE_URL": "http://127.0.0.1:9"},
        capture_output=True,
        timeout=60,
    )
    assert (before.returncode, after.returncode, down.returncode) == (1, 0, 2), (before.stdout, after.stdout)
    assert "w-health" in after.stdout


def test_a_worker_is_configured_with_the_broker_the_service_and_its_token_only(tmp_path: Path) -> None:
    """What `celery_worker` gives every worker of these tests, which run jobs end to end
    (test_worker_flow): no database URL and no secret key, whatever the test process has."""
    settings = ServiceSettings(
        data_dir=tmp_path, database_url="postgresql+psycopg://secret@db/x", secret_key="k", worker_token="t"
    )  # type: ignore[arg-type]
    os.environ["INTELLIPERF_DATABASE_URL"] = "postgresql+psycopg://leak@db/x"
    try:
        env = worker_env(settings, "w", "http://127.0.0.1:1")
    finally:
        del os.environ["INTELLIPERF_DATABASE_URL"]
    ours = {key for key in env if key.startswith("INTELLIPERF_")}
    assert ours == {
        "INTELLIPERF_DATA_DIR",
        "INTELLIPERF_SERVICE_URL",
        "INTELLIPERF_WORKER_TOKEN",
        "INTELLIPERF_HEARTBEAT_S",
        "INTELLIPERF_WORKER_NAME",
    }


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_the_worker_token_alone_claims_nothing(settings: ServiceSettings) -> None:
    """A process that learned the worker token and a queued job's id (from the broker, say) cannot take
    the job: its claim must name a delivery of that job."""
    with serve(settings, dispatch=False) as live, live.client() as client:
        mine, other = submit(client), submit(client)
        own_delivery = deliver(settings, mine)
        with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
            real = deliver(settings, other)
            near = real[:-1] + ("A" if real[-1] != "A" else "B")  # one character off
            for forged in (own_delivery, "x" * 43, near):
                with pytest.raises(NotDelivered, match=f"names no delivery of job {other}"):
                    api.claim(other, "attacker", "run-a", forged)
            missing = httpx.post(
                f"{live.url}/v1/worker/jobs/{other}/claim",
                json={"worker": "attacker", "run_id": "run-a"},
                headers={"Authorization": f"Bearer {WORKER_TOKEN}"},
            )
            assert missing.status_code == 422 and "delivery" in missing.text
            taken = api.claim(mine, "w-1", "run-1", own_delivery)
        state = client.get(f"/v1/jobs/{other}").json()
    assert taken is not None and taken.id == mine
    assert (state["status"], state["runs"], state["worker"]) == ("queued", 0, None)


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_an_events_batch_sent_again_is_stored_once(settings: ServiceSettings) -> None:
    with serve(settings, dispatch=False) as live, live.client() as client:
        job_id = submit(client)
        with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
            assert api.claim(job_id, "w-1", "run-1", deliver(settings, job_id)) is not None
            first = [EventIn(kind="log", message=f"line {i}") for i in range(3)]
            api.events(job_id, "run-1", 0, first)
            api.events(job_id, "run-1", 0, first)  # its answer was lost: sent again
            api.events(job_id, "run-1", 1, [EventIn(kind="log", message="line 3")])
        events = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
    assert [events.count(f'"line {i}"') for i in range(4)] == [1, 1, 1, 1]
    assert events.index('"line 0"') < events.index('"line 2"') < events.index('"line 3"')


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_run_the_reaper_took_the_job_from_writes_nothing_more(settings: ServiceSettings) -> None:
    settings = settings.model_copy(update={"worker_stale_s": 0.2})
    with serve(settings, dispatch=False) as live, live.client() as client:
        job_id = submit(client)
        reaper = live.server.config.app.state.dispatcher  # type: ignore[attr-defined]
        reaper.heard_since = utcnow() - timedelta(hours=1)
        with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
            for run in ("run-1", "run-2"):
                assert api.claim(job_id, f"w-{run}", run, deliver(settings, job_id)) is not None
                time.sleep(0.3)  # silent past worker_stale_s
                assert reaper.reap_lost_runs() == 1
                with pytest.raises(JobNotHeld):
                    api.events(job_id, run, 0, [EventIn(kind="log", message=f"{run} after it was reaped")])
                with pytest.raises(JobNotHeld):
                    api.result(job_id, JobResult(run_id=run, status="succeeded", outcome="diagnosed"))
        state = client.get(f"/v1/jobs/{job_id}").json()
        events = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
    assert (state["status"], state["outcome"], state["runs"]) == ("failed", "worker_lost", 2)
    assert "after it was reaped" not in events

"""A database outage for real: a private PostgreSQL server (the machine's own stays untouched) is stopped
under the running service and started again.

While it is down the API answers 503 with Retry-After and a JSON reason, never a plain-text 500; the Action's
client retries its submissions (idempotently) through the outage, and afterwards every submission is one
job: none lost, none duplicated.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import func, select

from intelliperf.action._client import ServiceClient
from intelliperf.contract import Application, JobSpec, RepositoryRef
from service.db.models import Job
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import ADMIN, WORKER_TOKEN, celery_worker, free_port, serve, wait_for
from tests.service.test_worker_api import deliver
from tests.service.test_worker_flow import REPLAY_SPEC, finished, submit
from worker.service_client import ServiceClient as WorkerApi

BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))


@dataclass
class PrivatePostgres:
    data: Path
    port: int

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def ctl(self, *args: str) -> None:
        options = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1"
        _as_postgres(str(BIN[-1] / "pg_ctl"), "-D", str(self.data), "-o", options, "-w", *args)

    def stop(self) -> None:
        self.ctl("-m", "immediate", "stop")  # as a crash would: no goodbye to the clients

    def start(self) -> None:
        self.ctl("-l", str(self.data / "server.log"), "start")


def _as_postgres(*argv: str) -> None:
    """PostgreSQL refuses to run as root: run its tools as the postgres user when this process is root."""
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=60)


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    if not BIN or (os.geteuid() == 0 and shutil.which("runuser") is None):
        pytest.skip("needs PostgreSQL's server binaries (Debian: postgresql) to run a private server")
    # the postgres user must reach its data folder: not under a private (0700) TMPDIR such as scripts/test's
    root = Path(tempfile.mkdtemp(prefix="intelliperf-pg-", dir="/tmp" if os.geteuid() == 0 else None))
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
    _as_postgres(str(BIN[-1] / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    server = PrivatePostgres(data, free_port())
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()  # already stopped by a failed test: fine
        shutil.rmtree(root, ignore_errors=True)


def _settings(tmp_path: Path, url: str) -> ServiceSettings:
    return ServiceSettings(
        data_dir=tmp_path / "data",
        database_url=url,
        admin_token=ADMIN,  # type: ignore[arg-type]
        worker_token=WORKER_TOKEN,  # type: ignore[arg-type]
        heartbeat_s=0.5,
        worker_stale_s=3.0,
        dispatch_sweep_s=0.5,
    )


def _spec(n: int) -> JobSpec:
    return JobSpec(
        repository=RepositoryRef(url="https://github.com/acme/kernels.git"),
        applications=[Application(command=["./app", str(n)])],
        formula="diagnoseOnly",
    )


def test_the_api_answers_503_with_retry_after_while_the_database_is_down(
    postgres: PrivatePostgres, tmp_path: Path
) -> None:
    with serve(_settings(tmp_path, postgres.url), dispatch=False) as live, live.client() as client:
        assert client.post("/v1/jobs", json=_spec(0).model_dump(mode="json")).status_code == 201
        postgres.stop()
        for method, path in (("POST", "/v1/jobs"), ("GET", "/v1/jobs"), ("GET", "/v1/workers")):
            body = _spec(1).model_dump(mode="json") if method == "POST" else None
            response = client.request(method, path, json=body)
            assert response.status_code == 503, (path, response.status_code, response.text)
            assert response.headers["content-type"] == "application/json"
            assert int(response.headers["retry-after"]) > 0
            assert "database is unavailable" in response.json()["detail"]
        assert client.get("/readyz").status_code == 503
        postgres.start()
        deadline = time.monotonic() + 20
        while (response := client.get("/v1/jobs")).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert response.status_code == 200 and response.json()["total"] == 1


def test_submissions_through_an_outage_each_make_exactly_one_job(
    postgres: PrivatePostgres, tmp_path: Path
) -> None:
    """Eight clients submit while the database goes away for about two seconds and comes back."""
    results: dict[int, tuple[str, bool]] = {}
    failures: list[BaseException] = []
    keys = {n: f"outage-{uuid.uuid4().hex}" for n in range(8)}

    with serve(_settings(tmp_path, postgres.url), dispatch=False) as live:
        postgres.stop()

        def submit(n: int) -> None:
            try:
                with ServiceClient(live.url, ADMIN) as client:
                    job, created = client.submit(
                        _spec(n), archive=None, secrets={}, idempotency_key=keys[n], retry_wait_s=2.0
                    )
                results[n] = (str(job["id"]), created)
            except BaseException as error:
                failures.append(error)

        threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        time.sleep(2.0)
        postgres.start()
        for thread in threads:
            thread.join(timeout=60)
    assert failures == []
    assert sorted(results) == list(range(8))
    assert len({job_id for job_id, _ in results.values()}) == 8
    db = Database(postgres.url)
    try:
        with db.session() as session:
            assert session.scalar(select(func.count()).select_from(Job)) == 8
            stored = set(session.scalars(select(Job.idempotency_scope)))
    finally:
        db.engine.dispose()
    assert stored == {f"admin:{key}" for key in keys.values()}


def test_a_job_running_through_an_outage_ends_with_its_result_and_every_event(
    postgres: PrivatePostgres, tmp_path: Path
) -> None:
    """A real Celery worker runs a job (its build takes 4 s); the database goes away for 6 s once the build
    has started, so the build's events and the engine's run into the outage. The worker retries them with
    backoff (the worker API answers 503 meanwhile): the job succeeds, nothing is left `running` and no event
    is missing."""
    settings = _settings(tmp_path, postgres.url).model_copy(update={"worker_stale_s": 60.0})
    spec = {**REPLAY_SPEC, "build_command": "sleep 4; echo built"}
    with (
        serve(settings) as live,
        celery_worker(settings, "w-outage", tmp_path / "worker.log"),
        live.client() as client,
    ):
        job_id = submit(client, spec)
        wait_for(
            lambda: (
                '"stage": "build"' in client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
            ),
            timeout=60,
            interval=0.05,
        )
        postgres.stop()
        time.sleep(6.0)
        postgres.start()
        state = wait_for(finished(client, job_id), timeout=90)
        events = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"})
    assert state["status"] == "succeeded", state  # type: ignore[index]
    assert state["outcome"] == "diagnosed"  # type: ignore[index]
    # the run that met the outage outlived it: not failed inside the worker and re-run after the reaper
    assert state["runs"] == 1, state  # type: ignore[index]
    log = (tmp_path / "worker.log").read_text()
    assert "the service is unavailable (503" in log and "failed inside the worker" not in log
    stages = [line for line in events.text.splitlines() if line.startswith("data:")]
    for stage in ("build", "timing", "counters", "diagnose"):
        assert any(f'"stage": "{stage}"' in line or f'"stage":"{stage}"' in line for line in stages), stage


def test_a_claim_and_an_archive_read_that_meet_the_outage_wait_for_the_database(
    postgres: PrivatePostgres, tmp_path: Path
) -> None:
    """The worker takes a job's message while the database is away: the API answers 503 with Retry-After
    and the worker's claim waits (before, the message was spent and the job waited for the re-dispatch, ten
    minutes later by default). The same for its archive, read in the moment after the claim. A claim the
    same run repeats (its first answer lost) returns the job again; another run's gets nothing."""
    settings = _settings(tmp_path, postgres.url)
    with serve(settings, dispatch=False) as live:
        with live.client() as client:
            job_id = submit(client)
        delivery = deliver(settings, job_id)
        api = WorkerApi(live.url, WORKER_TOKEN, retry_s=60)
        try:
            waited = []
            for step in ("claim", "archive"):
                postgres.stop()
                restart = threading.Timer(3.0, postgres.start)
                restart.start()
                started = time.monotonic()
                if step == "claim":
                    job = api.claim(job_id, "w-claim", "run-1", delivery)
                else:
                    archive = api.archive(job_id, "run-1")
                waited.append(time.monotonic() - started)
                restart.join()
            assert job is not None and job.id == job_id and job.source == "archive"
            assert archive[:2] == b"\x1f\x8b"  # the gzip the job was submitted with
            assert min(waited) >= 2.5, waited
            assert api.claim(job_id, "w-other", "run-2", delivery) is None  # taken
            again = api.claim(job_id, "w-claim", "run-1", delivery)  # the same run again, its answer lost
            assert again is not None and again.id == job_id
        finally:
            api.close()
    db = Database(postgres.url)
    try:
        with db.session() as session:
            stored = session.get(Job, job_id)
            assert stored is not None
            assert (stored.status, stored.worker_run, stored.runs) == ("running", "run-1", 1)
    finally:
        db.engine.dispose()

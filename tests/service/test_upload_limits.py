"""An upload's archive is decompressed only for a submission that passed every other check, in a bounded
pool of low-priority processes, so gzip bombs neither cost a refused caller's check nor starve the API.

Each bomb is a valid project: one file of 500 MiB of zeros, about 500 KiB as a tar.gz, under the 512 MiB
content limit, so checking it means decompressing all of it. The tests run on SQLite only: what they
measure is the API process, not the database."""

from __future__ import annotations

import os
import signal
import statistics
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from service.api.archive_checks import ArchiveChecks
from service.auth import create_token
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import LiveService, free_port, serve, wait_for
from tests.service.test_api_bad_input import SPEC, counts, upload
from tests.service.test_api_restart import HEADERS, api_process
from tests.support.archives import gzip_bomb
from tests.support.processes import live_processes

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

BOMB_BYTES = 500 * 2**20
UPLOAD_SPEC = {"applications": [{"command": "./app"}]}
REPOSITORY_SPEC = {**UPLOAD_SPEC, "repository": SPEC["repository"]}


@pytest.fixture(scope="session")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = gzip_bomb(tmp_path_factory.mktemp("bomb") / "bomb.tar.gz", BOMB_BYTES)
    data = path.read_bytes()
    assert len(data) < 2**20
    return data


def checks_of(live: LiveService) -> ArchiveChecks:
    checks: ArchiveChecks = live.server.config.app.state.archive_checks
    return checks


def timed(send: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    start = time.perf_counter()
    response = send()
    return response, time.perf_counter() - start


def token(db: Database, name: str, scopes: list[str]) -> str:
    with db.session() as session:
        return create_token(session, name, scopes)[1]


def test_a_bomb_from_a_token_refused_its_repository_is_never_decompressed(
    live: LiveService, db: Database, bomb: bytes
) -> None:
    scoped = token(db, "other-ci", ["other/*"])
    checks = checks_of(live)
    with live.client() as admin, live.client(scoped) as other:
        refused, refusal_s = timed(lambda: upload(other, spec=REPOSITORY_SPEC, archive=bomb))
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"] == "token 'other-ci' is scoped to other/*, not to acme/kernels"
        assert checks.started == 0
        assert upload(admin, spec=REPOSITORY_SPEC).status_code == 201  # starts the pool's process
        checked, check_s = timed(lambda: upload(admin, spec=REPOSITORY_SPEC, archive=bomb))
        assert checked.status_code == 201, checked.text
        assert checks.started == 2
        refused, refusal_s = timed(lambda: upload(other, spec=REPOSITORY_SPEC, archive=bomb))
        assert refused.status_code == 403 and checks.started == 2
    assert refusal_s < check_s / 5, (refusal_s, check_s)
    assert counts(db)[:2] == (2, 2)


def test_a_token_gets_429_past_its_checks_per_minute(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database
) -> None:
    settings = settings_for(database_url, archive_checks_per_token_per_minute=3)
    with serve(settings) as live, live.client() as admin:
        for _ in range(3):
            assert upload(admin).status_code == 201
        response = upload(admin)
        assert response.status_code == 429, response.text
        assert "3 archive checks in the last minute" in response.json()["detail"]
        assert "INTELLIPERF_ARCHIVE_CHECKS_PER_TOKEN_PER_MINUTE" in response.json()["detail"]
        assert 1 <= int(response.headers["Retry-After"]) <= 60
        with live.client(token(db, "another", ["*"])) as another:  # the limit is the token's own
            assert upload(another).status_code == 201
        assert checks_of(live).started == 4
    assert counts(db)[:2] == (4, 4)


def test_the_in_flight_limits_answer_at_their_edges(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database, bomb: bytes
) -> None:
    """One process, one upload may wait for it, two checks in flight per token: the admin's two bombs are
    taken (one checked, one waiting); the admin's third is 429 (its own limit), another token's is 503 (the
    service's queue is full), and both are answered at once."""
    settings = settings_for(
        database_url, archive_check_workers=1, archive_check_max_waiting=1, archive_checks_per_token=2
    )
    with (
        serve(settings) as live,
        live.client() as admin,
        live.client(token(db, "another", ["*"])) as another,
        ThreadPoolExecutor(2) as pool,
    ):
        checks = checks_of(live)
        taken = [pool.submit(upload, admin, archive=bomb) for _ in range(2)]
        wait_for(lambda: checks.in_flight == 2, timeout=30, interval=0.01)
        third, third_s = timed(lambda: upload(admin, archive=bomb))
        assert third.status_code == 429, third.text
        assert "already has 2 archive check(s) in progress" in third.json()["detail"]
        assert int(third.headers["Retry-After"]) > 0
        queued, queued_s = timed(lambda: upload(another, archive=bomb))
        assert queued.status_code == 503, queued.text
        assert "as many as it queues" in queued.json()["detail"]
        assert int(queued.headers["Retry-After"]) > 0
        assert checks.in_flight == 2 and checks.started == 2
        assert [future.result().status_code for future in taken] == [201, 201]
        assert upload(another).status_code == 201  # the queue is free again
    assert max(third_s, queued_s) < 1.0, (third_s, queued_s)
    assert counts(db)[:2] == (3, 3)


def spawned_children(parent: int) -> list[int]:
    """The live processes multiprocessing spawned from ``parent`` (the archive checks' processes)."""
    return [p.pid for p in live_processes() if p.parent == parent and any(b"spawn_main" in a for a in p.argv)]


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_checking_process_that_dies_is_a_503_and_the_pool_recovers(
    live: LiveService, db: Database, bomb: bytes
) -> None:
    checks = checks_of(live)
    with live.client() as admin, ThreadPoolExecutor(1) as pool:
        pending: Future[httpx.Response] = pool.submit(upload, admin, archive=bomb)
        wait_for(lambda: checks.in_flight == 1, timeout=30, interval=0.01)
        (child,) = wait_for(lambda: spawned_children(os.getpid()), timeout=30, interval=0.01)  # type: ignore[misc]
        os.kill(child, signal.SIGKILL)
        response = pending.result(timeout=60)
        assert response.status_code == 503, response.text
        assert "ended before it answered" in response.json()["detail"]
        assert int(response.headers["Retry-After"]) > 0
        assert upload(admin).status_code == 201
        assert not alive(child)
    assert counts(db)[:2] == (1, 1)


def test_the_checking_processes_end_with_a_killed_api_process(
    settings: ServiceSettings, tmp_path: Path
) -> None:
    port = free_port()
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=HEADERS, timeout=30)
    with api_process(settings, port, tmp_path / "api.log") as api, client:
        response = upload(client)
        assert response.status_code == 201, response.text
        (child,) = spawned_children(api.pid)
        api.send_signal(signal.SIGKILL)
        api.wait()
        wait_for(lambda: not alive(child), timeout=10, interval=0.05)


@pytest.mark.alone  # a latency bound: no other test's load beside it
def test_health_answers_while_eight_bombs_are_checked(live: LiveService, db: Database, bomb: bytes) -> None:
    """Eight concurrent bombs from four tokens (two each: within the default limits, so all are taken and
    checked one after another): /healthz answers within 250 ms at the 99th percentile while the checks
    run, and every bomb gets its answer."""
    checks = checks_of(live)
    clients = [live.client(token(db, f"ci-{n}", ["*"])) for n in range(4)]
    with live.client() as health, ThreadPoolExecutor(8) as pool:
        assert health.get("/healthz").status_code == 200
        bombs = [pool.submit(upload, client, archive=bomb) for client in clients for _ in range(2)]
        wait_for(lambda: checks.in_flight > 0, timeout=30, interval=0.01)
        latencies = []
        while checks.in_flight > 0:
            response, took = timed(lambda: health.get("/healthz"))
            assert response.status_code == 200
            latencies.append(took)
            time.sleep(0.02)
        statuses = sorted(future.result(timeout=120).status_code for future in bombs)
    for client in clients:
        client.close()
    p99 = statistics.quantiles(latencies, n=100, method="inclusive")[98]
    assert p99 < 0.25, (p99, len(latencies))
    assert len(latencies) >= 40, latencies
    assert set(statuses) <= {201, 429, 503} and statuses.count(201) >= 2, statuses
    assert checks.started == statuses.count(201)

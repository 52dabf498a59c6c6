"""How scripts/test deals tests to its two workers (tests/support/side_by_side.py)."""

from __future__ import annotations

import fcntl
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.parallel import free_port
from tests.support.side_by_side import pytest_collection_modifyitems, scope_of, turn


def test_the_redis_tests_share_one_worker_and_the_native_builds_another() -> None:
    redis = scope_of("tests/service/test_faults.py::test_x")
    assert redis == scope_of("tests/service/test_worker_flow.py::t[1]")
    assert redis == scope_of("tests/service/test_metrics_health.py::t")
    assert scope_of("tests/service/test_api_jobs.py::t[1]") == "tests/service/test_api_jobs.py"
    assert scope_of("tests/accordo/test_native_cpu.py::a") == scope_of("tests/profiler/test_build.py::b")
    assert scope_of("tests/deploy/test_service_image.py::a") == scope_of("tests/worker/test_container.py::b")
    assert scope_of("tests/formulas/test_occupancy.py::a") == "tests/formulas/test_occupancy.py"
    assert scope_of("tests/formulas/test_occupancy.py::a") != scope_of("tests/formulas/test_base.py::a")
    assert scope_of("tests/test_service_x.py::a") != redis


def test_a_redis_test_outside_the_redis_files_is_refused() -> None:
    known = SimpleNamespace(nodeid="tests/service/test_faults.py::t", fixturenames=["redis_url"])
    other = SimpleNamespace(nodeid="tests/service/test_api_jobs.py::t[sqlite]", fixturenames=["live"])
    stray = SimpleNamespace(nodeid="tests/service/test_new.py::t", fixturenames=["redis_url", "live"])
    pytest_collection_modifyitems([known, other])  # type: ignore[list-item]
    with pytest.raises(pytest.UsageError, match=r"tests/service/test_new\.py: Redis tests"):
        pytest_collection_modifyitems([known, other, stray])  # type: ignore[list-item]


def test_a_test_that_runs_alone_waits_for_the_others(tmp_path: Path) -> None:
    lock = tmp_path / "tests.lock"
    with turn(tmp_path, alone=False), lock.open("a") as tests:
        # another worker's test holds the shared lock: an exclusive one cannot be had meanwhile
        with pytest.raises(BlockingIOError):
            fcntl.flock(tests, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(tests, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a second shared one can
        fcntl.flock(tests, fcntl.LOCK_UN)
    with turn(tmp_path, alone=True), lock.open("a") as tests, pytest.raises(BlockingIOError):
        fcntl.flock(tests, fcntl.LOCK_SH | fcntl.LOCK_NB)


def test_each_worker_gets_ports_of_its_own_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whichever ports the system prefers to hand out (Linux: odd ones), each worker finds its own quickly."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    ports: dict[str, set[int]] = {}
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        started = time.monotonic()
        ports[worker] = {free_port() for _ in range(200)}
        assert time.monotonic() - started < 10, worker
    assert not ports["gw0"] & ports["gw1"]

"""Tests run side by side (pytest-xdist; scripts/test runs ``-n 2 -p tests.support.side_by_side``): which
tests share a worker, and which run with nothing beside them.

A pytest plugin rather than part of tests/conftest.py: it only acts in xdist's workers, and the GPU record
(benchmarks/gpu_record.py) hashes tests/conftest.py into every part, while the GPU tests run without xdist.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

SCOPES = {
    # one build of the native profiler (the session's native_lib) serves these files when one worker runs them
    "tests/accordo/test_native_cpu.py": "native_lib",
    "tests/accordo/test_run_errors.py": "native_lib",
    "tests/profiler/test_build.py": "native_lib",
    # the container engine (podman) and its images, started and built once
    "tests/deploy/test_service_image.py": "podman",
    "tests/worker/test_container.py": "podman",
}
"""Test files that one worker runs one after another; every other file is a scope of its own, except the
Redis tests (below)."""

REDIS = frozenset(
    {
        "tests/service/test_faults.py",
        "tests/service/test_metrics_health.py",
        "tests/service/test_worker_flow.py",
    }
)
"""The test files whose tests take a Redis database number (tests/service/conftest.py's redis_url): the
numbers come from one sequence, held per process, so these files run on one worker, one after another, and
no two of their tests flush the same number. pytest_collection_modifyitems refuses a file missing here."""


def scope_of(nodeid: str) -> str:
    """The scope (the worker's unit of work) of a test, by its node id."""
    path = nodeid.split("::", 1)[0]
    if path in REDIS:
        return "redis"
    return SCOPES.get(path, path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test taking a Redis database number outside REDIS' files could share a number with one of them."""
    strays = sorted(
        {item.nodeid.split("::", 1)[0] for item in items if "redis_url" in getattr(item, "fixturenames", ())}
        - REDIS
    )
    if strays:
        raise pytest.UsageError(f"{', '.join(strays)}: Redis tests; add them to REDIS in {__file__}")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Each worker gets whole scopes (their module fixtures are made once)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByScope(config, log)


def runs_alone(item: pytest.Item) -> bool:
    if item.get_closest_marker("alone") is not None:
        return True
    # a GPU test measures the GPU (and times it): nothing else may use it meanwhile; skipped, it is nothing
    return item.get_closest_marker("gpu") is not None and item.get_closest_marker("skip") is None


@contextmanager
def turn(folder: Path, alone: bool) -> Iterator[None]:
    """A readers-writer lock of the workers (flock on files in their shared folder): a test holds `tests`
    shared, one that runs alone holds it exclusively. Whoever waits for `tests` holds `door` meanwhile, so a
    test waiting to run alone is not overtaken by the other workers' next tests."""
    with (folder / "door.lock").open("a") as door, (folder / "tests.lock").open("a") as tests:
        fcntl.flock(door, fcntl.LOCK_EX)
        try:
            fcntl.flock(tests, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            if not alone:
                fcntl.flock(door, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(tests, fcntl.LOCK_UN)
            fcntl.flock(door, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under xdist, each test (its set-up and tear-down included) takes its turn; outside pytest-timeout's
    timer (tryfirst: this wrapper is the outer one), so waiting is not counted as the test's time."""
    if not hasattr(item.config, "workerinput"):
        return (yield)
    # each worker's basetemp is a folder of the run's (xdist names them popen-gw0, popen-gw1, ...)
    with turn(Path(item.config.option.basetemp).parent, runs_alone(item)):
        return (yield)

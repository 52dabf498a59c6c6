"""The production entry point (python -m service.api.server): processes that serve and stop, and a start-up
heap frozen before the first request (the full collections that walked it were the POST p99)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from service.api import server
from service.settings import get_service_settings
from tests.service.conftest import ADMIN, ROOT, free_port


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freeze_startup_heap_moves_live_objects_out_of_the_collector(unfrozen: None) -> None:
    survivor = [[n] for n in range(1000)]
    assert any(o is survivor for o in gc.get_objects())
    frozen = server.freeze_startup_heap()
    assert frozen == gc.get_freeze_count() > len(survivor)
    assert not any(o is survivor for o in gc.get_objects())  # no generation holds it: no collection walks it


def test_each_server_process_builds_the_app_and_freezes_its_heap_before_serving(
    unfrozen: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("INTELLIPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("INTELLIPERF_DATABASE_URL", f"sqlite:///{tmp_path / 'service.db'}")
    monkeypatch.setenv("INTELLIPERF_ADMIN_TOKEN", ADMIN)
    get_service_settings.cache_clear()
    seen: dict[str, object] = {}

    def run(self: uvicorn.Server, sockets: list[object] | None = None) -> None:
        seen.update(frozen=gc.get_freeze_count(), app=self.config.app, sockets=sockets)

    monkeypatch.setattr(uvicorn.Server, "run", run)
    try:
        server._run("127.0.0.1", 0, server._uvicorn_options("warning", False))
    finally:
        get_service_settings.cache_clear()
    assert isinstance(seen["app"], FastAPI)  # built once, before the freeze, not by uvicorn's factory call
    assert isinstance(seen["frozen"], int) and seen["frozen"] > 50_000  # the app's modules, routes, schemas
    sockets = seen["sockets"]
    assert isinstance(sockets, list) and len(sockets) == 1
    sockets[0].close()


def test_two_server_processes_serve_the_port_and_stop_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    env |= {
        "INTELLIPERF_DATA_DIR": str(tmp_path / "data"),
        "INTELLIPERF_DATABASE_URL": f"sqlite:///{tmp_path / 'service.db'}",
        "INTELLIPERF_ADMIN_TOKEN": ADMIN,
        "PYTHONPATH": str(ROOT),
    }
    argv = [sys.executable, "-m", "service.api.server", "--port", str(port), "--workers", "2"]
    log = tmp_path / "server.log"
    with log.open("wb") as sink:
        process = subprocess.Popen([*argv, "--log-level", "warning"], env=env, cwd=tmp_path, stderr=sink)
    try:
        deadline = time.monotonic() + 60
        answered = 0
        while answered < 20:
            assert process.poll() is None, f"the server exited early: {log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, "the server did not answer within 60 s"
            try:
                # a new connection per request: the kernel spreads them over both processes' sockets
                answered += httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200
            except httpx.TransportError:
                time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)


def test_several_processes_are_served_after_one_migration(monkeypatch: pytest.MonkeyPatch) -> None:
    """With --workers N the parent migrates the database once and the processes do not: N processes that
    each migrated a fresh database at once raced to create its tables, and the loser took the server down."""
    import service.db.migrate
    import service.settings

    migrated: list[str] = []
    started: list[dict[str, object]] = []

    class FakeProcess:
        def __init__(self, **kwargs: object) -> None:
            self.kwargs, self.exitcode = kwargs, 0

        def start(self) -> None:
            started.append(self.kwargs)

        def is_alive(self) -> bool:
            return False

        def join(self, timeout: float | None = None) -> None:
            pass

    class Context:
        Process = FakeProcess

    monkeypatch.setattr(service.db.migrate, "upgrade", migrated.append)
    monkeypatch.setattr(
        service.settings,
        "get_service_settings",
        lambda: type("S", (), {"resolved_database_url": "sqlite://x"}),
    )
    monkeypatch.setattr(server.multiprocessing, "get_context", lambda method: Context)
    server.serve("127.0.0.1", 0, 3)
    assert migrated == ["sqlite://x"]
    assert [s["kwargs"] for s in started] == [{"migrate": False}] * 3
    assert {s["target"] for s in started} == {server._run}

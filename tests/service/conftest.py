"""The service's test bed: real databases (SQLite and PostgreSQL), a real uvicorn server on 127.0.0.1,
a real Redis, and real Celery worker processes.

PostgreSQL and Redis are the machine's (127.0.0.1:5432 and :6379, started by .ci/run if down). Each
test gets its own PostgreSQL database and its own Redis database number, so nothing leaks between tests.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from service.api.app import create_app
from service.cli import uvicorn_options
from service.db.migrate import upgrade
from service.db.session import Database
from service.settings import ServiceSettings
from tests.support.databases import flushed_redis_database, fresh_postgres_database
from tests.support.parallel import free_port

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN_URL = os.environ.get("INTELLIPERF_TEST_PG", "postgresql+psycopg://root@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("INTELLIPERF_TEST_REDIS", "redis://127.0.0.1:6379")
ADMIN = "test-admin-secret"
WORKER_TOKEN = "test-worker-token"
SERVICE_URL_FILE = "test-service-url"
"""In a test's data_dir: where its live service listens (serve), so the test's workers reach it (a file,
since pytest may import this module twice: as the conftest and as tests.service.conftest)."""


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards."""
    if not _port_open("127.0.0.1", 5432):
        pytest.fail("PostgreSQL is not listening on 127.0.0.1:5432 (.ci/run starts it)")
    with fresh_postgres_database(PG_ADMIN_URL) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test that uses this runs twice: on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'intelliperf.db'}"
        return
    with postgres_database() as url:
        yield url


_redis_slots = iter(range(1, 16))


@pytest.fixture
def redis_url() -> Iterator[str]:
    """A flushed Redis database number of its own."""
    if not _port_open("127.0.0.1", 6379):
        pytest.fail("Redis is not listening on 127.0.0.1:6379 (.ci/run starts it)")
    slot = next(_redis_slots, None)
    if slot is None:  # more tests than slots: start again (each flushes first)
        globals()["_redis_slots"] = iter(range(1, 16))
        slot = next(_redis_slots)
    with flushed_redis_database(REDIS_URL, slot) as url:
        yield url


@pytest.fixture
def settings_for(tmp_path: Path) -> Callable[..., ServiceSettings]:
    def make(database_url: str, **overrides: object) -> ServiceSettings:
        values: dict[str, object] = {
            "data_dir": tmp_path / "data",
            "database_url": database_url,
            "admin_token": ADMIN,
            "worker_token": WORKER_TOKEN,
            "heartbeat_s": 0.5,
            "worker_stale_s": 3.0,
            "dispatch_sweep_s": 0.5,
            "events_poll_s": 0.05,
        }
        return ServiceSettings(**(values | overrides))  # type: ignore[arg-type]

    return make


@pytest.fixture
def settings(settings_for: Callable[..., ServiceSettings], database_url: str) -> ServiceSettings:
    return settings_for(database_url)


@pytest.fixture
def db(settings: ServiceSettings) -> Iterator[Database]:
    upgrade(settings.resolved_database_url)
    database = Database(settings.resolved_database_url)
    yield database
    database.dispose()


@dataclass
class LiveService:
    url: str
    settings: ServiceSettings
    server: uvicorn.Server

    def client(self, token: str | None = ADMIN, **kwargs: object) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kwargs)  # type: ignore[arg-type]


@contextlib.contextmanager
def serve(settings: ServiceSettings, *, dispatch: bool = True) -> Iterator[LiveService]:
    """The real app under a real uvicorn server on 127.0.0.1, in a thread of this process."""
    app = create_app(settings, dispatch=dispatch)
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", **uvicorn_options(settings)
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    url_file = settings.data_dir / SERVICE_URL_FILE
    url_file.parent.mkdir(parents=True, exist_ok=True)
    url_file.write_text(f"http://127.0.0.1:{port}")
    try:
        yield LiveService(url=f"http://127.0.0.1:{port}", settings=settings, server=server)
    finally:
        url_file.unlink(missing_ok=True)
        server.should_exit = True
        thread.join(timeout=20)


@pytest.fixture
def live(settings: ServiceSettings) -> Iterator[LiveService]:
    with serve(settings) as service:
        yield service


def worker_env(settings: ServiceSettings, name: str, service_url: str) -> dict[str, str]:
    """A worker's whole configuration: the broker (its folder in data_dir, or its URL), the service's URL
    and the worker token. No database URL and no secret key reach it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    env |= {
        "INTELLIPERF_DATA_DIR": str(settings.data_dir),
        "INTELLIPERF_SERVICE_URL": service_url,
        "INTELLIPERF_WORKER_TOKEN": settings.worker_secret or "",
        "INTELLIPERF_HEARTBEAT_S": str(settings.heartbeat_s),
        "INTELLIPERF_WORKER_NAME": name,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
    }
    if settings.broker_url:
        env["INTELLIPERF_BROKER_URL"] = settings.broker_url
    return env


@contextlib.contextmanager
def celery_worker(
    settings: ServiceSettings,
    name: str,
    log: Path,
    queues: str = "gpu.nvidia.any",
    extra_env: dict[str, str] | None = None,
    service_url: str | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A real `celery worker -P solo` process talking to the service at ``service_url`` (by default the live
    service of ``settings``, see serve); waits until its first heartbeat is in the database."""
    from service.db.models import Worker

    argv = [sys.executable, "-m", "celery", "-A", "worker.app", "worker", "-P", "solo", "-c", "1"]
    argv += ["-Q", queues, "-n", f"{name}@test", "--without-gossip", "--without-mingle", "--loglevel", "INFO"]
    with log.open("ab") as sink:
        process = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=worker_env(settings, name, _service_url(settings, service_url)) | (extra_env or {}),
            stdout=sink,
            stderr=sink,
            start_new_session=True,
        )
    database = Database(settings.resolved_database_url)
    try:
        deadline = time.monotonic() + 60
        while True:
            with database.session() as session:
                if session.get(Worker, name) is not None:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {name} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        database.dispose()


def _service_url(settings: ServiceSettings, given: str | None) -> str:
    if given is not None:
        return given
    url_file = settings.data_dir / SERVICE_URL_FILE
    if not url_file.is_file():
        raise RuntimeError("start the service (serve) before its workers, or name its URL")
    return url_file.read_text()


def project_archive(files: dict[str, str | bytes]) -> bytes:
    """A tar.gz of ``files`` (path -> content)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o755 if name.endswith(".sh") else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def recorded_example_archive(example: str = "transpose_bank", variant: str = "original") -> bytes:
    """An example project with its profile recorded on the GPU machine under ``profile/``."""
    files: dict[str, str | bytes] = {}
    for path in (ROOT / "examples" / example).iterdir():
        if path.is_file():
            files[path.name] = path.read_bytes()
    for path in (ROOT / "tests" / "fixtures" / "gpu" / example / variant).iterdir():
        files[f"profile/{path.name}"] = path.read_bytes()
    return project_archive(files)


def wait_for(predicate: Callable[[], object], timeout: float = 60, interval: float = 0.1) -> object:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(interval)

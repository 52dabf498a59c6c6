"""Service benchmark (CPU machine): how fast does the API take and show jobs, and how soon does an idle worker
start one? Against the production configuration: PostgreSQL and Redis on 127.0.0.1, the API served by
uvicorn in its own processes (``python -m service.api.server --workers N``: ``service.api.app:create_app`` in
N processes, each with its own SO_REUSEPORT socket, so the kernel spreads the clients' connections over
them; ``uvicorn --workers N`` shares one socket and uvloop let one process take most of a burst of
connections), a real Celery worker process.

* saturation: ``--clients`` keep-alive connections, each sending its next request as soon as the last one
  answered (closed loop), ``--requests`` POST /v1/jobs in all (at most ``--duration-s``): submit_per_s.
  Then the same for GET /v1/jobs/{id} over the submitted jobs: get_per_s. In a closed loop the mean latency
  is clients / throughput (Little's law), so these latencies say how deep the queue was, not how fast a
  request is; they are kept as ``*_saturated_*``.
* latency: the same clients at a fixed offered load (``--rate`` requests/s in all, each client on its own
  schedule, open loop): p50/p99 of POST and of GET. A request's latency counts from the moment it was due,
  not from when it was sent, so a stalled server is not hidden (no coordinated omission). The POST and GET
  phases alternate ``--latency-trials`` times and the percentiles are over every request of every trial
  (one stall in any trial counts); each trial's own p50/p99 and server and PostgreSQL CPU per request are
  kept under ``phases``. PostgreSQL's work per submission is the same in every trial, so its CPU time per
  request says how fast the machine ran during that trial.
* machine_cpu_speed: before the benchmark, one process per core counts fixed loops per half second for
  ``--speed-probe-s`` seconds; ``fastest_over_slowest`` is how much the machine's speed varied on its own.
* dispatch: an idle Celery worker (``-P solo`` on the ``gpu.nvidia.any`` queue, started with the server but
  sent nothing before this phase: the load phases' jobs ask for ``sm_90`` and wait on another queue);
  ``--dispatch-jobs`` jobs submitted one at a time, each after the previous one finished and at most
  ``--dispatch-rate`` per second; queued-to-started is ``jobs.started_at - jobs.created_at`` in the
  database. The jobs name a repository on 127.0.0.1:9 that refuses connections, so the worker claims each
  job and fails it in its clone step.

The load generator is one asyncio process speaking HTTP/1.1 over raw streams (pre-built requests, only the
status line, Content-Length and body read back): far cheaper per request than an HTTP client library, so it
leaves the 2 cores to the server and the database. Its CPU time is recorded.

    python -m benchmarks.service --out benchmarks/results/service.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.support.databases import flushed_redis_database, fresh_postgres_database

ROOT = Path(__file__).resolve().parents[1]
PG_ADMIN_URL = os.environ.get("INTELLIPERF_BENCH_PG", "postgresql+psycopg://root@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("INTELLIPERF_BENCH_REDIS", "redis://127.0.0.1:6379")
REDIS_DB = 14  # the benchmark's own Redis database number, flushed before and after
ADMIN = "bench-admin-secret"
WORKER_TOKEN = "bench-worker-token"
REPOSITORY = "bench/kernels"
REFUSING_HOST = "127.0.0.1:9"  # nothing listens: a clone from it fails at once
# Load-phase jobs go to a queue no running worker of the benchmark consumes (a registered but parked node
# serves it, so the service accepts them); dispatch-phase jobs to the running worker's.
LOAD_SPEC = {
    "repository": {"url": f"https://github.com/{REPOSITORY}.git"},
    "applications": [{"command": "./app 20"}],
    "build_command": "make",
    "formula": "diagnoseOnly",
    "gpu": {"arch": "sm_90"},
}
DISPATCH_SPEC = {
    "repository": {"url": f"https://{REFUSING_HOST}/{REPOSITORY}.git"},
    "applications": [{"command": "./app"}],
    "formula": "diagnoseOnly",
}
_ID = re.compile(rb'"id":"([0-9a-f]{32})"')


# ----------------------------------------------------------------------------------------------------------
# The parts: a fresh PostgreSQL database, a flushed Redis database, uvicorn, a Celery worker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def service_env(database_url: str, broker_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    env |= {
        "INTELLIPERF_DATABASE_URL": database_url,
        "INTELLIPERF_BROKER_URL": broker_url,
        "INTELLIPERF_ADMIN_TOKEN": ADMIN,
        "INTELLIPERF_WORKER_TOKEN": WORKER_TOKEN,
        "INTELLIPERF_DATA_DIR": str(data_dir),
        "INTELLIPERF_GITHUB_HOSTS": f"github.com,{REFUSING_HOST}",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    return env | extra


def server_argv(port: int, workers: int) -> list[str]:
    """How an operator serves the API from several processes (uvicorn with uvloop and httptools when
    installed); the app factory reads INTELLIPERF_* from the environment."""
    argv = [sys.executable, "-m", "service.api.server", "--host", "127.0.0.1", "--port", str(port)]
    return [*argv, "--workers", str(workers), "--no-access-log", "--log-level", "warning"]


def _wait_http(port: int, path: str, process: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"http://127.0.0.1:{port}{path}", timeout=2).status_code == 200:
                return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server did not answer in {timeout} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass(frozen=True)
class Server:
    port: int
    group: int  # the process group of uvicorn and its workers
    database: str  # the name of its PostgreSQL database


@contextlib.contextmanager
def api_server(env: dict[str, str], workers: int, log: Path, port: int) -> Iterator[Server]:
    """uvicorn in its own process group; yields once /healthz answers."""
    with log.open("ab") as sink:
        process = subprocess.Popen(
            server_argv(port, workers), cwd=ROOT, env=env, stdout=sink, stderr=sink, start_new_session=True
        )
    try:
        _wait_http(port, "/healthz", process, log, timeout=60)
        yield Server(port, process.pid, env["INTELLIPERF_DATABASE_URL"].rsplit("/", 1)[1])
    finally:
        _stop(process)


@contextlib.contextmanager
def celery_worker(
    env: dict[str, str], name: str, log: Path, service_url: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A real ``celery worker -P solo`` on gpu.nvidia.any (it starts while the caller goes on), a client of
    the service at ``service_url`` like any GPU node: the broker, that URL and the worker token only."""
    argv = [sys.executable, "-m", "celery", "-A", "worker.app", "worker", "-P", "solo", "-c", "1"]
    argv += ["-Q", "gpu.nvidia.any", "-n", f"{name}@bench", "--without-gossip", "--without-mingle"]
    argv += ["--loglevel", "WARNING"]
    env = {k: v for k, v in env.items() if k not in ("INTELLIPERF_DATABASE_URL", "INTELLIPERF_ADMIN_TOKEN")}
    env |= {
        "INTELLIPERF_WORKER_NAME": name,
        "INTELLIPERF_HEARTBEAT_S": "5",
        "INTELLIPERF_SERVICE_URL": service_url,
    }
    with log.open("ab") as sink:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=sink, stderr=sink, start_new_session=True)
    try:
        yield process
    finally:
        _stop(process)


def wait_for_worker(process: subprocess.Popen[bytes], name: str, database_url: str, log: Path) -> None:
    """Until the worker's first heartbeat is in the database, and a moment more to reach the broker."""
    from service.db.models import Worker
    from service.db.session import Database

    database = Database(database_url)
    try:
        deadline = time.monotonic() + 60
        while True:
            with database.session() as session:
                if session.get(Worker, name) is not None:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {name} did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.1)
    finally:
        database.dispose()
    time.sleep(0.5)


def register_parked_node(database_url: str) -> None:
    """A worker row for a node that serves the load phase's queue but is not running: the service refuses
    jobs for queues no registered worker serves, and the load phase's jobs must stay queued, not run."""
    from service.db.models import Worker
    from service.db.session import Database

    database = Database(database_url)
    try:
        with database.session() as session:
            session.add(Worker(name="bench-parked-sm90", hostname="parked", queues=["gpu.nvidia.sm90"]))
    finally:
        database.dispose()


def make_token(database_url: str) -> str:
    """A stored API token scoped to the benchmark's repository: what the GitHub Action would hold."""
    from service.auth import create_token
    from service.db.session import Database

    database = Database(database_url)
    try:
        with database.session() as session:
            _token, secret = create_token(session, "bench", [REPOSITORY])
    finally:
        database.dispose()
    return secret


# ----------------------------------------------------------------------------------------------------------
# The load generator


def http_request(method: str, path: str, token: str, body: bytes | None = None) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + (body or b"")


async def read_chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The chunks of a chunked HTTP/1.1 body (a streamed response: server-sent events), as they arrive,
    until the last one (or the connection's end)."""
    while size_line := await reader.readline():
        size = int(size_line.strip() or b"0", 16)
        if size == 0:
            await reader.readline()  # the blank line after the last chunk
            return
        yield (await reader.readexactly(size + 2))[:-2]


class Connection:
    """One keep-alive HTTP/1.1 connection; requests go one at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def request(self, raw: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            await self.open()
        assert self.reader is not None and self.writer is not None
        self.writer.write(raw)
        status_line = await self.reader.readline()
        if not status_line:
            await self.close()
            raise ConnectionError("the server closed the connection")
        length, close, chunked = 0, False, False
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
            elif name == b"transfer-encoding" and value.strip().lower() == b"chunked":
                chunked = True
        if chunked:
            body = b"".join([chunk async for chunk in read_chunks(self.reader)])
        else:
            body = await self.reader.readexactly(length) if length else b""
        if close:
            await self.close()
        return int(status_line.split(b" ", 2)[1]), body

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None


@dataclass
class LoadResult:
    """One phase's requests; ``pooled`` joins the trials of a phase into one."""

    requests: int = 0
    errors: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float | None = None  # the uvicorn processes
    postgres_cpu_s: float | None = None  # the PostgreSQL backends serving the benchmark's database
    cpu_busy: float | None = None  # share of the machine's CPU time that was busy during the run
    ids: list[str] = field(default_factory=list)

    @property
    def per_s(self) -> float:
        return (self.requests - self.errors) / self.elapsed_s if self.elapsed_s else 0.0

    def percentile(self, q: float) -> float | None:
        return percentile(self.latencies_ms, q)

    @staticmethod
    def pooled(trials: list[LoadResult]) -> LoadResult:
        def total(values: list[float | None]) -> float | None:
            return None if any(v is None for v in values) else sum(v for v in values if v is not None)

        busy = [t.cpu_busy for t in trials if t.cpu_busy is not None]
        statuses: dict[int, int] = {}
        for trial in trials:
            for code, count in trial.statuses.items():
                statuses[code] = statuses.get(code, 0) + count
        return LoadResult(
            requests=sum(t.requests for t in trials),
            errors=sum(t.errors for t in trials),
            statuses=statuses,
            latencies_ms=[ms for t in trials for ms in t.latencies_ms],
            elapsed_s=sum(t.elapsed_s for t in trials),
            client_cpu_s=sum(t.client_cpu_s for t in trials),
            server_cpu_s=total([t.server_cpu_s for t in trials]),
            postgres_cpu_s=total([t.postgres_cpu_s for t in trials]),
            cpu_busy=round(sum(busy) / len(busy), 3) if busy else None,
            ids=[i for t in trials for i in t.ids],
        )


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def process_cpu_s(match: Callable[[int, str], bool]) -> float:
    """CPU seconds (user + system) of the processes ``match(pgrp, cmdline)`` selects, from /proc."""
    total = 0
    for folder in Path("/proc").glob("[0-9]*"):
        try:
            text = (folder / "stat").read_text()
            cmdline = (folder / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if match(int(fields[2]), cmdline):
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _cpu_times() -> tuple[int, int] | None:
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields), idle


async def run_load(
    port: int,
    requests: list[bytes],
    clients: int,
    *,
    rate: float | None = None,
    duration_s: float = 30.0,
    expect: int = 200,
    server_group: int | None = None,
    database: str | None = None,
) -> LoadResult:
    """Send ``requests`` over ``clients`` connections. Without ``rate``, each client sends its next request
    as soon as the last one answered; with it, request k of the whole run is due at k / rate seconds and its
    latency counts from then. Stops after ``duration_s`` whatever is left."""
    result = LoadResult()
    connections = [Connection(port) for _ in range(clients)]
    # open every connection first, so the run measures requests and not TCP handshakes
    for connection in connections:
        await connection.open()
    in_server = lambda group, _comm: group == server_group  # noqa: E731
    in_postgres = lambda _group, cmdline: bool(database) and f" {database} " in cmdline  # noqa: E731
    server_before, postgres_before = process_cpu_s(in_server), process_cpu_s(in_postgres)
    cpu_before, process_before = _cpu_times(), time.process_time()
    start = time.perf_counter()
    deadline = start + duration_s

    async def client(index: int) -> None:
        connection = connections[index]
        for k in range(index, len(requests), clients):
            if rate is not None:
                due = start + k / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            else:
                due = time.perf_counter()
            if due > deadline:
                return
            sent = due if rate is not None else time.perf_counter()
            try:
                status, body = await connection.request(requests[k])
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
                result.requests += 1
                result.errors += 1
                await connection.close()
                continue
            result.latencies_ms.append((time.perf_counter() - sent) * 1000)
            result.requests += 1
            result.statuses[status] = result.statuses.get(status, 0) + 1
            if status != expect:
                result.errors += 1
            elif status == 201 and (match := _ID.search(body)):
                result.ids.append(match.group(1).decode())

    await asyncio.gather(*(client(i) for i in range(clients)))
    result.elapsed_s = time.perf_counter() - start
    result.client_cpu_s = time.process_time() - process_before
    if server_group is not None:
        result.server_cpu_s = process_cpu_s(in_server) - server_before
    if database is not None:
        result.postgres_cpu_s = process_cpu_s(in_postgres) - postgres_before
    cpu_after = _cpu_times()
    if cpu_before and cpu_after and cpu_after[0] > cpu_before[0]:
        total = cpu_after[0] - cpu_before[0]
        result.cpu_busy = round(1 - (cpu_after[1] - cpu_before[1]) / total, 3)
    for connection in connections:
        await connection.close()
    return result


def post_requests(token: str, count: int, spec: dict[str, object] = LOAD_SPEC) -> list[bytes]:
    body = json.dumps(spec).encode()
    return [http_request("POST", "/v1/jobs", token, body)] * count


def get_requests(token: str, ids: list[str], count: int) -> list[bytes]:
    return [http_request("GET", f"/v1/jobs/{ids[k % len(ids)]}", token) for k in range(count)]


def load(server: Server, requests: list[bytes], clients: int, **kwargs: object) -> LoadResult:
    async def main() -> LoadResult:
        return await run_load(
            server.port, requests, clients, server_group=server.group, database=server.database, **kwargs
        )  # type: ignore[arg-type]

    try:
        import uvloop
    except ImportError:
        return asyncio.run(main())
    return uvloop.run(main())


# ----------------------------------------------------------------------------------------------------------
# Dispatch latency


def dispatch_latency(port: int, token: str, database_url: str, jobs: int, rate: float) -> dict[str, object]:
    """Submit ``jobs`` one at a time to an idle worker; queued-to-started and its parts, from the database."""
    import httpx
    from sqlalchemy import select

    from service.db.models import FINISHED, Job
    from service.db.session import Database

    database = Database(database_url)
    ids: list[str] = []
    unfinished = 0
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        ) as c:
            for _ in range(jobs):
                began = time.monotonic()
                response = c.post("/v1/jobs", json=DISPATCH_SPEC, timeout=30)
                response.raise_for_status()
                job_id = response.json()["id"]
                ids.append(job_id)
                deadline = began + 30
                while time.monotonic() < deadline:  # the worker is idle again before the next job
                    with database.session() as session:
                        if session.scalar(select(Job.status).where(Job.id == job_id)) in FINISHED:
                            break
                    time.sleep(0.01)
                else:
                    unfinished += 1
                time.sleep(max(0.05, 1 / rate - (time.monotonic() - began)))
        with database.session() as session:
            rows = session.execute(
                select(Job.created_at, Job.dispatched_at, Job.started_at, Job.status, Job.outcome).where(
                    Job.id.in_(ids)
                )
            ).all()
    finally:
        database.dispose()

    def ms(a: datetime | None, b: datetime | None) -> float | None:
        return (b - a).total_seconds() * 1000 if a and b else None

    started = [ms(r.created_at, r.started_at) for r in rows]
    to_broker = [ms(r.created_at, r.dispatched_at) for r in rows]
    queued = [x for x in started if x is not None]
    sent = [x for x in to_broker if x is not None]
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[f"{r.status}:{r.outcome}"] = outcomes.get(f"{r.status}:{r.outcome}", 0) + 1
    return {
        "dispatch_jobs": len(ids),
        "dispatch_started": len(queued),
        "dispatch_unfinished": unfinished,
        "dispatch_p50_ms": _round(percentile(queued, 50)),
        "dispatch_p99_ms": _round(percentile(queued, 99)),
        "dispatch_max_ms": _round(max(queued, default=None)),
        "dispatch_to_broker_p50_ms": _round(percentile(sent, 50)),
        "dispatch_to_broker_p99_ms": _round(percentile(sent, 99)),
        "dispatch_outcomes": outcomes,
    }


def _per_request(cpu_s: float | None, requests: int) -> float | None:
    return round(cpu_s * 1000 / requests, 2) if cpu_s is not None and requests else None


def _round(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


# ----------------------------------------------------------------------------------------------------------


def machine() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    system = f"{platform.system()} {platform.release()}"
    return f"{socket.gethostname()}: {os.cpu_count()} cores, {model}, {system}"


def _spin_chunks(seconds: float, chunk_s: float, out: Any) -> None:
    counts = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started, loops = time.perf_counter(), 0
        while time.perf_counter() - started < chunk_s:
            for _ in range(10_000):
                pass
            loops += 1
        counts.append(loops)
    out.put(counts)


def cpu_speed(seconds: float = 10.0, chunk_s: float = 0.5) -> dict[str, object]:
    """How steady the machine's CPUs are: one process per core spins for ``seconds``, counting fixed loops
    per ``chunk_s``; the spread of those counts is the spread of the speed a request gets. On a shared VM
    it varies with the neighbours, and a latency phase run during a slow stretch has a longer tail."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    cores = os.cpu_count() or 1
    workers = [context.Process(target=_spin_chunks, args=(seconds, chunk_s, queue)) for _ in range(cores)]
    for worker in workers:
        worker.start()
    counts = sorted(n for _ in workers for n in queue.get())
    for worker in workers:
        worker.join()
    slowest, fastest = counts[0], counts[-1]
    return {
        "seconds": seconds,
        "processes": cores,
        "loops_per_chunk_min": slowest,
        "loops_per_chunk_median": counts[len(counts) // 2],
        "loops_per_chunk_max": fastest,
        "fastest_over_slowest": round(fastest / slowest, 2) if slowest else None,
    }


def server_versions(database_url: str, broker_url: str) -> tuple[str, str]:
    """What the run was measured against."""
    import redis
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    engine = create_engine(database_url)
    with engine.connect() as connection:
        pg = str(connection.execute(text("SHOW server_version")).scalar())
    engine.dispose()
    client = redis.Redis.from_url(broker_url)
    version = str(client.info("server")["redis_version"])
    client.close()
    parsed_db, parsed_broker = make_url(database_url), urlsplit(broker_url)
    where_db = f"{parsed_db.host}:{parsed_db.port or 5432}"
    where_broker = (
        f"{parsed_broker.hostname}:{parsed_broker.port or 6379}, db {parsed_broker.path.strip('/')}"
    )
    return (
        f"PostgreSQL {pg.split()[0]} ({where_db}, fresh database {parsed_db.database})",
        f"Redis {version} ({where_broker})",
    )


def run(
    *,
    clients: int,
    requests: int,
    rate: float,
    duration_s: float,
    dispatch_jobs: int,
    dispatch_rate: float,
    server_workers: int,
    log_dir: Path,
    redis_db: int = REDIS_DB,
    latency_trials: int = 3,
    speed_probe_s: float = 10.0,
    fleet_options: dict[str, Any] | None = None,
) -> dict[str, object]:
    """``fleet_options``: benchmarks.fleet's (workers, jobs, events_per_s, batch, readers, client_rate,
    heartbeat_s, duration_s, connections)."""
    from service.db.migrate import upgrade

    fleet_options = fleet_options or {}

    speed = cpu_speed(speed_probe_s)  # before anything of the benchmark runs: the machine on its own
    with (
        fresh_postgres_database(PG_ADMIN_URL, prefix="intelliperf_bench") as database_url,
        flushed_redis_database(REDIS_URL, redis_db) as broker_url,
    ):
        upgrade(database_url)  # once here, so the server's workers find the schema current
        register_parked_node(database_url)
        token = make_token(database_url)
        database, broker = server_versions(database_url, broker_url)
        env = service_env(database_url, broker_url, log_dir / "data")
        port = free_port()
        with (
            celery_worker(env, "bench-worker", log_dir / "worker.log", f"http://127.0.0.1:{port}") as worker,
            api_server(env, server_workers, log_dir / "uvicorn.log", port) as server,
        ):
            # warm-up: every server process imports, connects and serves a few of each
            warm = load(server, post_requests(token, 4 * clients), clients)
            load(server, get_requests(token, warm.ids or ["0" * 32], 4 * clients), clients, expect=0)
            post_sat = load(
                server, post_requests(token, requests), clients, duration_s=duration_s, expect=201
            )
            ids = post_sat.ids or warm.ids
            get_sat = load(server, get_requests(token, ids, requests), clients, duration_s=duration_s)
            post_bodies, get_bodies = post_requests(token, requests), get_requests(token, ids, requests)
            at_rate = {"rate": rate, "duration_s": duration_s}
            post_trials, get_trials = [], []
            for _ in range(latency_trials):
                post_trials.append(load(server, post_bodies, clients, expect=201, **at_rate))
                get_trials.append(load(server, get_bodies, clients, **at_rate))
            post_rate, get_rate = LoadResult.pooled(post_trials), LoadResult.pooled(get_trials)
            # the worker consumes only gpu.nvidia.any; the load phases' jobs wait on gpu.nvidia.sm90
            wait_for_worker(worker, "bench-worker", database_url, log_dir / "worker.log")
            dispatch = dispatch_latency(server.port, token, database_url, dispatch_jobs, dispatch_rate)
            worker.terminate()  # its warm shutdown overlaps the server's
            from benchmarks.fleet import run_fleet  # imports this module: here, not at its top

            fleet = run_fleet(
                server.port,
                token,
                WORKER_TOKEN,
                LOAD_SPEC,
                server_group=server.group,
                database_url=database_url,
                **fleet_options,
            )
    phases = {
        "post_saturated": post_sat,
        "get_saturated": get_sat,
        "post_at_rate": post_rate,
        "get_at_rate": get_rate,
    }
    result: dict[str, object] = {
        "machine": machine(),
        "machine_cpu_speed": speed,
        "database": database,
        "broker": broker,
        "server": " ".join(
            ["python", *server_argv(port, server_workers)[1:], "(uvicorn, uvloop, httptools)"]
        ),
        "api_url": f"http://127.0.0.1:{port}",
        "server_workers": server_workers,
        "load_generator": "one asyncio process, raw HTTP/1.1 keep-alive connections (benchmarks/service.py)",
        "auth": "stored API token scoped to one repository",
        "clients": clients,
        "requests": requests,
        "rate_per_s": rate,
        "latency_trials": latency_trials,
        "submit_per_s": round(post_sat.per_s, 1),
        "get_per_s": round(get_sat.per_s, 1),
        "post_p50_ms": _round(post_rate.percentile(50)),
        "post_p99_ms": _round(post_rate.percentile(99)),
        "get_p50_ms": _round(get_rate.percentile(50)),
        "get_p99_ms": _round(get_rate.percentile(99)),
        "post_saturated_p50_ms": _round(post_sat.percentile(50)),
        "post_saturated_p99_ms": _round(post_sat.percentile(99)),
        "get_saturated_p50_ms": _round(get_sat.percentile(50)),
        "get_saturated_p99_ms": _round(get_sat.percentile(99)),
        "errors": sum(p.errors for p in phases.values()),
        **dispatch,
        **fleet,
        "phases": {
            name: {
                "requests": p.requests,
                "errors": p.errors,
                "statuses": {str(k): v for k, v in sorted(p.statuses.items())},
                "elapsed_s": round(p.elapsed_s, 2),
                "per_s": round(p.per_s, 1),
                "p50_ms": _round(p.percentile(50)),
                "p90_ms": _round(p.percentile(90)),
                "p99_ms": _round(p.percentile(99)),
                "max_ms": _round(max(p.latencies_ms, default=None)),
                "load_generator_cpu_s": round(p.client_cpu_s, 2),
                "server_cpu_ms_per_request": _per_request(p.server_cpu_s, p.requests),
                "postgres_cpu_ms_per_request": _per_request(p.postgres_cpu_s, p.requests),
                "machine_cpu_busy": p.cpu_busy,
            }
            for name, p in phases.items()
        },
        "targets": {
            "p99_ms": 50,
            "submit_per_s": 300,
            "dispatch_p99_ms": 500,
            "fleet_events_lost": 0,
            "fleet_events_duplicated": 0,
        },
    }
    for name, runs in (("post_at_rate", post_trials), ("get_at_rate", get_trials)):
        result["phases"][name]["trials"] = [  # type: ignore[index]
            {
                "p50_ms": _round(t.percentile(50)),
                "p99_ms": _round(t.percentile(99)),
                "server_cpu_ms_per_request": _per_request(t.server_cpu_s, t.requests),
                "postgres_cpu_ms_per_request": _per_request(t.postgres_cpu_s, t.requests),
            }
            for t in runs
        ]
    return result


def print_table(result: dict[str, object]) -> None:
    phases: dict[str, dict[str, object]] = result["phases"]  # type: ignore[assignment]
    print()
    print(
        f"{'phase':<16} {'requests':>8} {'errors':>6} {'per s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'cpu busy':>8} {'server cpu ms/req':>17} {'pg cpu ms/req':>13}"
    )
    for name, p in phases.items():
        print(
            f"{name:<16} {p['requests']:>8} {p['errors']:>6} {p['per_s']:>8} {p['p50_ms']!s:>8} "
            f"{p['p99_ms']!s:>8} {p['machine_cpu_busy']!s:>8} {p['server_cpu_ms_per_request']!s:>17} "
            f"{p['postgres_cpu_ms_per_request']!s:>13}"
        )
    print(
        f"{'dispatch':<16} {result['dispatch_jobs']:>8} {result['dispatch_unfinished']:>6} {'':>8} "
        f"{result['dispatch_p50_ms']!s:>8} {result['dispatch_p99_ms']!s:>8}"
    )
    print()
    print(
        f"{result['machine']}; {result['server_workers']} server worker(s); {result['clients']} clients: "
        f"{result['submit_per_s']} submissions/s (target >= 300); at {result['rate_per_s']}/s POST p99 "
        f"{result['post_p99_ms']} ms, GET p99 {result['get_p99_ms']} ms (target < 50); dispatch p99 "
        f"{result['dispatch_p99_ms']} ms (target < 500)"
    )
    print(
        f"fleet: {result['fleet_workers']} workers heartbeating, {result['fleet_jobs']} jobs writing "
        f"{result['fleet_events_per_s']} events/s, {result['fleet_readers']} readers: heartbeat p99 "
        f"{result['fleet_heartbeat_p99_ms']} ms, event write p99 {result['fleet_event_write_p99_ms']} ms, "
        f"delivery p99 {result['fleet_event_p99_ms']} ms, {result['fleet_server_cpu_ms_per_request']} ms "
        f"server CPU per request; events lost {result['fleet_events_lost']}, duplicated "
        f"{result['fleet_events_duplicated']}; errors {result['fleet_errors']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "service.json")
    parser.add_argument("--clients", type=int, default=50, help="concurrent keep-alive connections")
    parser.add_argument("--requests", type=int, default=6000, help="requests per phase, at most")
    parser.add_argument(
        "--rate", type=float, default=300.0, help="offered load of the latency phases (req/s)"
    )
    parser.add_argument("--duration-s", type=float, default=20.0, help="longest phase")
    parser.add_argument("--dispatch-jobs", type=int, default=100)
    parser.add_argument("--dispatch-rate", type=float, default=5.0, help="dispatch jobs per second, at most")
    parser.add_argument("--server-workers", type=int, default=2, help="server processes")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help="Redis database number (flushed)")
    parser.add_argument("--logs", type=Path, help="keep the server's and worker's logs here")
    parser.add_argument(
        "--latency-trials", type=int, default=3, help="POST and GET latency phases, alternating, pooled"
    )
    parser.add_argument(
        "--speed-probe-s", type=float, default=10.0, help="seconds of the CPU-steadiness probe first"
    )
    fleet = parser.add_argument_group("fleet phase (benchmarks/fleet.py)")
    fleet.add_argument("--fleet-workers", type=int, default=1000, help="simulated workers heartbeating")
    fleet.add_argument("--fleet-jobs", type=int, default=200, help="running jobs writing events")
    fleet.add_argument("--fleet-events-per-s", type=float, default=2000.0, help="events written, in all")
    fleet.add_argument("--fleet-batch", type=int, default=10, help="events per write")
    fleet.add_argument("--fleet-readers", type=int, default=20, help="event streams followed")
    fleet.add_argument("--fleet-client-rate", type=float, default=10.0, help="submissions and reads per s")
    fleet.add_argument("--fleet-heartbeat-s", type=float, default=10.0)
    fleet.add_argument("--fleet-duration-s", type=float, default=30.0)
    fleet.add_argument("--fleet-connections", type=int, default=64)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="intelliperf-bench-") as scratch:
        log_dir = args.logs or Path(scratch)
        log_dir.mkdir(parents=True, exist_ok=True)
        result = run(
            clients=args.clients,
            requests=args.requests,
            rate=args.rate,
            duration_s=args.duration_s,
            dispatch_jobs=args.dispatch_jobs,
            dispatch_rate=args.dispatch_rate,
            server_workers=args.server_workers,
            log_dir=log_dir,
            redis_db=args.redis_db,
            latency_trials=args.latency_trials,
            speed_probe_s=args.speed_probe_s,
            fleet_options={
                "workers": args.fleet_workers,
                "jobs": args.fleet_jobs,
                "events_per_s": args.fleet_events_per_s,
                "batch": args.fleet_batch,
                "readers": args.fleet_readers,
                "client_rate": args.fleet_client_rate,
                "heartbeat_s": args.fleet_heartbeat_s,
                "duration_s": args.fleet_duration_s,
                "connections": args.fleet_connections,
            },
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print_table(result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The fleet phase of the service benchmark: the load a large deployment's GPU workers put on the service.

Simulated in one asyncio process against the real server (benchmarks/service.py starts it): ``workers``
workers each sending its heartbeat every ``heartbeat_s`` through the worker API; ``jobs`` running jobs
(submitted, then claimed through the worker API by a run of their own) each writing its events in batches
of ``batch`` once a second, ``events_per_s`` in all; ``readers`` clients following one job's event stream
each (server-sent events); and clients submitting and reading jobs at ``client_rate`` each. Every request is
due at a fixed time (open loop) and its latency counts from then; they share ``connections`` keep-alive
connections. An event's delivery latency is from the moment its batch was sent to the moment a reader
received it. At the end every job is finished through the worker API and its stored events are read back:
an event whose write was answered 204 and that is not stored once is lost (or duplicated).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.service import Connection, http_request, percentile, process_cpu_s, read_chunks

__all__ = ["FleetLoad", "run_fleet"]

Build = Callable[[], bytes]


@dataclass
class FleetLoad:
    latencies_ms: dict[str, list[float]] = field(default_factory=dict)
    statuses: dict[str, dict[int, int]] = field(default_factory=dict)
    errors: int = 0
    delivery_ms: list[float] = field(default_factory=list)
    written: dict[int, set[int]] = field(default_factory=dict)  # job index: event seqs answered 204

    def record(self, kind: str, status: int, ms: float) -> None:
        self.latencies_ms.setdefault(kind, []).append(ms)
        counts = self.statuses.setdefault(kind, {})
        counts[status] = counts.get(status, 0) + 1


def _worker_request(method: str, path: str, token: str, body: dict[str, object] | None = None) -> bytes:
    return http_request(method, path, token, json.dumps(body).encode() if body is not None else None)


def _beat(i: int, current_job: str | None = None) -> dict[str, object]:
    """Worker i's heartbeat; a worker running a job names it (the service's reaper takes a job back from a
    run whose heartbeats stop naming it)."""
    return {
        "run_id": f"w{i}",
        "hostname": f"fleet-host-{i // 8}",
        "queues": ["gpu.nvidia.sm90"],
        "current_job": current_job,
    }


async def _setup_jobs(
    port: int,
    token: str,
    worker_token: str,
    spec: dict[str, object],
    jobs: int,
    workers: int,
    database_url: str,
) -> list[str]:
    """Every worker's first heartbeat, then ``jobs`` jobs submitted, job i claimed by worker i's run ``w<i>``
    (so the service's reaper sees each job's run alive), with a delivery of the job made in the database as
    the dispatcher makes one for each broker message."""
    connection = await Connection(port).open()
    ids = []
    try:
        for i in range(workers):
            beat = _worker_request("PUT", f"/v1/worker/workers/fleet-{i}", worker_token, _beat(i))
            status, body = await connection.request(beat)
            if status != 204:
                raise RuntimeError(f"fleet setup: heartbeat answered {status}: {body[:300]!r}")
        for i in range(jobs):
            status, body = await connection.request(
                http_request("POST", "/v1/jobs", token, json.dumps(spec).encode())
            )
            if status != 201:
                raise RuntimeError(f"fleet setup: submit answered {status}: {body[:300]!r}")
            job_id = json.loads(body)["id"]
            claim = {"worker": f"fleet-{i}", "run_id": f"w{i}", "delivery": _delivery(database_url, job_id)}
            status, body = await connection.request(
                _worker_request("POST", f"/v1/worker/jobs/{job_id}/claim", worker_token, claim)
            )
            if status != 200:
                raise RuntimeError(f"fleet setup: claim answered {status}: {body[:300]!r}")
            ids.append(job_id)
    finally:
        await connection.close()
    return ids


def _delivery(database_url: str, job_id: str) -> str:
    from service.db.session import Database
    from service.deliveries import new_deliveries

    database = Database(database_url)
    try:
        with database.session() as session:
            return new_deliveries(session, [job_id])[job_id]
    finally:
        database.dispose()


async def _follow(port: int, token: str, job_id: str, load: FleetLoad, stop: asyncio.Event) -> None:
    """One reader of a job's event stream (chunked server-sent events) until the job ends."""
    connection = await Connection(port).open()
    reader, writer = connection.reader, connection.writer
    assert reader is not None and writer is not None
    writer.write(http_request("GET", f"/v1/jobs/{job_id}/events", token))
    try:
        await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        pending = b""
        async for chunk in read_chunks(reader):
            *lines, pending = (pending + chunk).split(b"\n")
            received = time.time()
            for line in lines:
                if line.startswith(b"data: ") and b"fleet " in line:
                    message = json.loads(line[6:]).get("message", "")
                    load.delivery_ms.append((received - float(message.split()[3])) * 1000)
    except (OSError, asyncio.IncompleteReadError, ValueError):
        if not stop.is_set():
            load.errors += 1
    finally:
        await connection.close()


async def _drive(
    port: int, schedule: list[tuple[float, str, Build, Callable[[int], None] | None]], connections: int
) -> FleetLoad:
    """Send each scheduled request at its due time over a shared pool of connections."""
    load = FleetLoad()
    queue: asyncio.Queue[tuple[float, str, Build, Callable[[int], None] | None] | None] = asyncio.Queue()
    for item in sorted(schedule, key=lambda item: item[0]):
        queue.put_nowait(item)
    pool = [await Connection(port).open() for _ in range(connections)]

    async def sender(connection: Connection) -> None:
        while True:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            due, kind, build, done = item
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            try:
                status, _body = await connection.request(build())
            except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError, IndexError):
                load.errors += 1
                await connection.close()
                continue
            load.record(kind, status, (time.perf_counter() - due) * 1000)
            if status >= 400:
                load.errors += 1
            elif done is not None:
                done(status)

    await asyncio.gather(*(sender(c) for c in pool))
    for connection in pool:
        await connection.close()
    return load


async def _fleet(
    port: int,
    token: str,
    worker_token: str,
    spec: dict[str, object],
    *,
    workers: int,
    jobs: int,
    events_per_s: float,
    batch: int,
    readers: int,
    client_rate: float,
    heartbeat_s: float,
    duration_s: float,
    connections: int,
    server_group: int,
    database_url: str,
) -> dict[str, object]:
    if jobs > workers:
        raise ValueError("each running job needs a worker: jobs <= workers")
    ids = await _setup_jobs(port, token, worker_token, spec, jobs, workers, database_url)
    start = time.perf_counter() + 1.0
    schedule: list[tuple[float, str, Build, Callable[[int], None] | None]] = []
    for i in range(workers):
        beat = _beat(i, ids[i] if i < len(ids) else None)
        raw = _worker_request("PUT", f"/v1/worker/workers/fleet-{i}", worker_token, beat)
        t = start + heartbeat_s * i / workers
        while t < start + duration_s:
            schedule.append((t, "heartbeat", lambda raw=raw: raw, None))
            t += heartbeat_s
    posts_per_job_s = events_per_s / batch / jobs
    written: dict[int, set[int]] = {j: set() for j in range(jobs)}
    for j, job_id in enumerate(ids):
        t, k = start + j / jobs / posts_per_job_s, 0
        while t < start + duration_s:
            seqs = list(range(k * batch, (k + 1) * batch))

            def build(job_id: str = job_id, j: int = j, k: int = k, seqs: list[int] = seqs) -> bytes:
                now = f"{time.time():.6f}"
                events = [{"kind": "log", "message": f"fleet {j} {s} {now}"} for s in seqs]
                body = {"run_id": f"w{j}", "batch": k, "events": events}
                return _worker_request("POST", f"/v1/worker/jobs/{job_id}/events", worker_token, body)

            def done(status: int, j: int = j, seqs: list[int] = seqs) -> None:
                if status == 204:
                    written[j].update(seqs)

            schedule.append((t, "event_write", build, done))
            t, k = t + 1 / posts_per_job_s, k + 1
    body = json.dumps(spec).encode()
    n = int(client_rate * duration_s)
    for k in range(n):
        t = start + k / client_rate
        submit = http_request("POST", "/v1/jobs", token, body)
        read = http_request("GET", f"/v1/jobs/{ids[k % len(ids)]}", token)
        schedule.append((t, "submit", lambda raw=submit: raw, None))
        schedule.append((t + 0.5 / client_rate, "get", lambda raw=read: raw, None))
    stop = asyncio.Event()
    followers_load = FleetLoad()
    followers = [
        asyncio.create_task(_follow(port, token, ids[r], followers_load, stop)) for r in range(readers)
    ]
    in_server = lambda group, _cmdline: group == server_group  # noqa: E731
    server_before, wall_before = process_cpu_s(in_server), time.perf_counter()
    load = await _drive(port, schedule, connections)
    elapsed = time.perf_counter() - wall_before
    server_cpu_s = process_cpu_s(in_server) - server_before
    stop.set()
    # the end: every job finished by its run, so each reader's stream ends; then the stored events
    verify = await Connection(port).open()
    lost = duplicated = 0
    finished: dict[int, int] = {}
    try:
        for j, job_id in enumerate(ids):
            result = {"run_id": f"w{j}", "status": "succeeded", "outcome": "diagnosed"}
            path = f"/v1/worker/jobs/{job_id}/result"
            status, _ = await verify.request(_worker_request("POST", path, worker_token, result))
            finished[status] = finished.get(status, 0) + 1
        _done, unfinished = await asyncio.wait(followers, timeout=60)
        for task in unfinished:
            task.cancel()
        await verify.close()  # idle past the server's keep-alive while the readers finished
        for j, job_id in enumerate(ids):
            _status, body = await verify.request(
                http_request("GET", f"/v1/jobs/{job_id}/events?follow=false", token)
            )
            stored = [
                int(json.loads(line[6:])["message"].split()[2])
                for line in body.split(b"\n")
                if line.startswith(b"data: ") and b'"fleet ' in line
            ]
            lost += len(written[j] - set(stored))
            duplicated += len(stored) - len(set(stored))
    finally:
        await verify.close()
    requests = sum(len(v) for v in load.latencies_ms.values())

    def p99(kind: str) -> float | None:
        value = percentile(load.latencies_ms.get(kind, []), 99)
        return round(value, 1) if value is not None else None

    delivery = percentile(followers_load.delivery_ms, 99)
    return {
        "fleet_workers": workers,
        "fleet_jobs": jobs,
        "fleet_readers": readers,
        "fleet_duration_s": round(elapsed, 2),
        "fleet_requests": requests,
        "fleet_requests_per_s": round(requests / elapsed, 1) if elapsed else None,
        "fleet_errors": load.errors + followers_load.errors,
        "fleet_results": {str(k): v for k, v in finished.items()},
        "fleet_readers_unfinished": len(unfinished),
        "fleet_statuses": {k: {str(s): c for s, c in v.items()} for k, v in load.statuses.items()},
        "fleet_events_written": sum(len(v) for v in written.values()),
        "fleet_events_per_s": round(sum(len(v) for v in written.values()) / elapsed, 1) if elapsed else None,
        "fleet_events_lost": lost,
        "fleet_events_duplicated": duplicated,
        "fleet_events_delivered_to_readers": len(followers_load.delivery_ms),
        "fleet_heartbeat_p99_ms": p99("heartbeat"),
        "fleet_event_write_p99_ms": p99("event_write"),
        "fleet_event_p99_ms": round(delivery, 1) if delivery is not None else None,
        "fleet_submit_p99_ms": p99("submit"),
        "fleet_get_p99_ms": p99("get"),
        "fleet_server_cpu_s": round(server_cpu_s, 2),
        "fleet_server_cpu_ms_per_request": round(server_cpu_s * 1000 / requests, 2) if requests else None,
    }


def run_fleet(
    port: int, token: str, worker_token: str, spec: dict[str, object], **options: object
) -> dict[str, object]:
    return asyncio.run(_fleet(port, token, worker_token, spec, **options))  # type: ignore[arg-type]

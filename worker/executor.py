"""Runs the engine for one job, in a subprocess, with a time limit, cancellation and live events.

The local executor is what runs where no container engine does (``LocalExecutor`` says what it isolates
and what only a container does); the container executor (docker SDK) implements the same protocol. Both
stream the engine's JSON-line events back to the caller, stop the engine when the job is cancelled or over
its time limit, and return the files it wrote.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from intelliperf.contract import JobSpec
from worker.job_environment import host_environment, llm_key_environment

__all__ = ["EngineEvent", "ExecutionResult", "Executor", "LocalExecutor", "parse_line"]

POLL_S = 0.25
KILL_GRACE_S = 5.0


@dataclass(frozen=True)
class EngineEvent:
    kind: str  # 'stage', 'log' or 'error'
    message: str
    stage: str | None = None
    code: int | None = None


@dataclass(frozen=True)
class ExecutionResult:
    exit_code: int | None
    timed_out: bool
    cancelled: bool
    error: EngineEvent | None
    report: dict[str, object] | None
    summary: str | None
    log_tail: str


class Executor(Protocol):
    def run(
        self,
        spec: JobSpec,
        project: Path,
        out: Path,
        *,
        on_events: Callable[[list[EngineEvent]], None],
        should_cancel: Callable[[], bool],
        time_limit_s: float,
        env: Mapping[str, str] | None = None,
        scratch: Path | None = None,
        counters: Path | None = None,
    ) -> ExecutionResult:
        """``spec``: the job, as validated once when it was claimed. ``env``: the job's own secrets for the
        engine (its LLM key), never logged. ``scratch``: the job's scratch folder (``project`` and ``out``
        are in it), removed if the worker dies while the job runs. ``counters``: the repository's counter
        entries, downloaded for this job, for the engine to read (worker.counter_entries)."""
        ...


def parse_line(line: str) -> EngineEvent:
    text = line.rstrip("\n")
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("event") in ("stage", "log", "error"):
            return EngineEvent(
                kind=str(data["event"]),
                message=str(data.get("message", "")),
                stage=data.get("stage"),
                code=data.get("code"),
            )
    return EngineEvent(kind="log", message=text)


def _pump(stream: IO[str], sink: queue.Queue[str | None]) -> None:
    for line in stream:
        sink.put(line)
    sink.put(None)


REPRODUCER = "reproducer"  # the folder of the job's outputs holding the best rewrite's reproducer


def read_outputs(out: Path) -> tuple[dict[str, object] | None, str | None]:
    report_file, summary_file = out / "report.json", out / "summary.md"
    report = json.loads(report_file.read_text()) if report_file.is_file() else None
    summary = summary_file.read_text() if summary_file.is_file() else None
    return report, summary


class LocalExecutor:
    """The engine in a child process tree of this worker (no container), under ``worker.job_supervisor``.

    What it isolates: the job's environment (an allow-list, worker.job_environment: no token, broker URL or
    other secret of the worker's), its home and temporary folders (its own, in the job's scratch folder),
    its processes (a session of their own, all killed when the job ends, is stopped, or the worker dies,
    also those that daemonize), and its scratch folder (removed when the worker dies). What only a
    container isolates: the file system (the job's copy of its repository's counters is read-only only
    there, a copy no other job reads), the network (the broker and the database on this host's loopback),
    and the worker's own processes, which a job running as the same user may signal or, as root, read.
    """

    def __init__(self, python: str = sys.executable, env: dict[str, str] | None = None) -> None:
        """``env``: variables for every engine this executor starts (the tests' settings), beside the
        allow-listed ones."""
        self.python = python
        self.env = env

    def environment(self, spec: JobSpec, scratch: Path, job_env: Mapping[str, str] | None) -> dict[str, str]:
        home, tmp = scratch / "home", scratch / "tmp"
        home.mkdir(parents=True, exist_ok=True)
        tmp.mkdir(parents=True, exist_ok=True)
        env = host_environment(os.environ, home, tmp) | (self.env or {}) | llm_key_environment(spec, job_env)
        root = str(Path(__file__).parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
        return env

    def run(
        self,
        spec: JobSpec,
        project: Path,
        out: Path,
        *,
        on_events: Callable[[list[EngineEvent]], None],
        should_cancel: Callable[[], bool],
        time_limit_s: float,
        env: Mapping[str, str] | None = None,
        scratch: Path | None = None,
        counters: Path | None = None,
    ) -> ExecutionResult:
        out.mkdir(parents=True, exist_ok=True)
        spec_file = out / "spec.json"
        spec_file.write_text(spec.model_dump_json())
        engine = [self.python, "-m", "worker.engine_main", "--spec", str(spec_file)]
        engine += ["--project", str(project), "--out", str(out)]
        engine += ["--counters", str(counters)] if counters is not None else []
        argv = [self.python, "-m", "worker.job_supervisor", "--worker-pid", str(os.getpid())]
        argv += ["--grace", str(KILL_GRACE_S)]
        argv += ["--scratch", str(scratch)] if scratch is not None else []
        argv += ["--", *engine]
        process = subprocess.Popen(
            argv,
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=self.environment(spec, scratch or out, env),
            start_new_session=True,
        )
        assert process.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        pump = threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True)
        pump.start()
        deadline = time.monotonic() + time_limit_s
        tail: list[str] = []
        error: EngineEvent | None = None
        timed_out = cancelled = False
        finished_output = False
        while True:
            batch, finished_output = _drain(lines, finished_output)
            events = [parse_line(line) for line in batch]
            for event in events:
                if event.kind == "error":
                    error = event
                tail = [*tail, event.message][-40:]
            if events:
                on_events(events)
            if process.poll() is not None and finished_output:
                break
            if process.poll() is not None:
                # the supervisor killed every process of the job before it exited: the pipe ends at once
                pump.join(timeout=KILL_GRACE_S)
                finished_output = not pump.is_alive()
                continue
            if not (timed_out or cancelled):
                if time.monotonic() > deadline:
                    timed_out = True
                    _stop(process)
                elif should_cancel():
                    cancelled = True
                    _stop(process)
            time.sleep(POLL_S)
        process.stdout.close()
        report, summary = read_outputs(out)
        return ExecutionResult(
            exit_code=process.returncode,
            timed_out=timed_out,
            cancelled=cancelled,
            error=error,
            report=report,
            summary=summary,
            log_tail="\n".join(tail),
        )


def _drain(lines: queue.Queue[str | None], finished: bool) -> tuple[list[str], bool]:
    batch: list[str] = []
    for line in _available(lines):
        if line is None:
            finished = True
        else:
            batch.append(line)
    return batch, finished


def _available(lines: queue.Queue[str | None]) -> Iterator[str | None]:
    while True:
        try:
            yield lines.get_nowait()
        except queue.Empty:
            return


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM to the job's supervisor, which stops the engine and, after its grace period, kills whatever
    of the job is left; SIGKILL to the whole group only if the supervisor itself does not end."""
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=2 * KILL_GRACE_S + 5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()

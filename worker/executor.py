"""Runs the engine for one job, in a subprocess, with a time limit, cancellation and live events.

The local executor is what runs where no container engine does; the container executor (docker SDK)
implements the same ``Executor`` protocol. Both stream the engine's JSON-line events back to the
caller, stop the engine when the job is cancelled or over its time limit, and return the files it
wrote.
"""

from __future__ import annotations

import contextlib
import ctypes
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

__all__ = ["EngineEvent", "ExecutionResult", "Executor", "LocalExecutor", "parse_line"]

POLL_S = 0.25
PR_SET_PDEATHSIG = 1
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
    ) -> ExecutionResult:
        """``spec``: the job, as validated once when it was claimed. ``env``: variables for the engine only
        (the job's LLM key), never logged."""
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


def _die_with_parent() -> None:
    """Runs in the engine's process before exec: SIGKILL it if this worker dies (Linux prctl)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _pump(stream: IO[str], sink: queue.Queue[str | None]) -> None:
    for line in stream:
        sink.put(line)
    sink.put(None)


def read_outputs(out: Path) -> tuple[dict[str, object] | None, str | None]:
    report_file, summary_file = out / "report.json", out / "summary.md"
    report = json.loads(report_file.read_text()) if report_file.is_file() else None
    summary = summary_file.read_text() if summary_file.is_file() else None
    return report, summary


class LocalExecutor:
    """The engine in a child process group of this worker (no container)."""

    def __init__(self, python: str = sys.executable, env: dict[str, str] | None = None) -> None:
        self.python = python
        self.env = env

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
    ) -> ExecutionResult:
        out.mkdir(parents=True, exist_ok=True)
        spec_file = out / "spec.json"
        spec_file.write_text(spec.model_dump_json())
        argv = [self.python, "-m", "worker.engine_main", "--spec", str(spec_file)]
        argv += ["--project", str(project), "--out", str(out)]
        child_env = {**os.environ, **(self.env or {}), **(env or {}), "PYTHONUNBUFFERED": "1"}
        root = str(Path(__file__).parent.parent)
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, child_env.get("PYTHONPATH")]))
        process = subprocess.Popen(
            argv,
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=child_env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
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
        exited_at: float | None = None
        while True:
            batch, finished_output = _drain(lines, finished_output)
            events = [parse_line(line) for line in batch]
            for event in events:
                if event.kind == "error":
                    error = event
                tail = [*tail, event.message][-40:]
            if events:
                on_events(events)
            if process.poll() is not None:
                exited_at = exited_at or time.monotonic()
                # a stray grandchild may hold the pipe open: it goes with the group
                if finished_output or time.monotonic() - exited_at > KILL_GRACE_S:
                    _kill_group(process)
                    break
            if not (timed_out or cancelled):
                if time.monotonic() > deadline:
                    timed_out = True
                    _stop(process)
                elif should_cancel():
                    cancelled = True
                    _stop(process)
            time.sleep(POLL_S)
        pump.join(timeout=KILL_GRACE_S)  # the group is gone, so the pipe ends
        if not pump.is_alive():
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


def _kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _stop(process: subprocess.Popen[str]) -> None:
    """SIGTERM to the whole group, SIGKILL after a grace period."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        _kill_group(process)

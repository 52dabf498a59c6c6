"""Run a child process with a time limit, its whole process group killed on timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Completed", "describe_exit", "run_process"]


@dataclass(frozen=True)
class Completed:
    argv: Sequence[str] | str
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def output(self) -> str:
        return self.stdout + ("\n" + self.stderr if self.stderr else "")


def describe_exit(returncode: int | None, timed_out: bool = False, timeout_s: float | None = None) -> str:
    if timed_out:
        return f"timed out after {timeout_s:g} s" if timeout_s else "timed out"
    if returncode is None:
        return "did not finish"
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def run_process(
    argv: Sequence[str] | str,
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    shell: bool = False,
) -> Completed:
    """Run to completion or timeout. FileNotFoundError/PermissionError propagate to the caller."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        shell=shell,
        executable="/bin/bash" if shell else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        timed_out = True
    return Completed(argv, proc.returncode, stdout, stderr, time.perf_counter() - start, timed_out)

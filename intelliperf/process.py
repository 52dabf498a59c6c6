"""Run a child process with a time limit, its whole process group killed on timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _decode(data: bytes | None) -> str:
    return data.decode("utf-8", errors="replace") if data else ""


def run_process(
    argv: Sequence[str] | str,
    *,
    cwd: str | os.PathLike[str] | None,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    shell: bool = False,
) -> Completed:
    """Run to completion or timeout, in its own process group with no stdin; on timeout (or if the caller
    is interrupted) the whole group is killed. FileNotFoundError/PermissionError propagate to the caller.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        shell=shell,
        executable="/bin/bash" if shell else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    timed_out = False
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        try:
            stdout, stderr = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:  # a process outside the group holds the pipes open
            proc.kill()
            stdout, stderr = b"", b"(output unavailable: a process outside the group kept the pipes open)"
            proc.wait()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return Completed(
        argv, proc.returncode, _decode(stdout), _decode(stderr), time.perf_counter() - start, timed_out
    )

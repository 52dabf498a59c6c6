"""Run a child process with a time limit, its whole process group killed on timeout."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = [
    "JIT_CACHE",
    "Completed",
    "clear_jit_cache",
    "describe_exit",
    "is_python_command",
    "run_process",
    "with_jit_cache",
]

JIT_CACHE = ".triton-cache"
"""Where an application run in a copy of the project keeps the kernels Triton compiles: in that copy. The
reference and each candidate therefore compile their own kernels, and a candidate is never served a
kernel cached from another copy's source (``CandidateTree`` clears it with every new edit)."""


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


def is_python_command(command: Sequence[str]) -> bool:
    """A Python application (`python3 app.py`, `python3 -m pkg`, `./app.py`): Triton and PyTorch compile its
    kernels when it runs, so a rewrite needs no build step, and Proton can run it."""
    if not command:
        return False
    program = Path(command[0]).name
    return program.startswith("python") or program.endswith(".py")


def with_jit_cache(env: Mapping[str, str], cwd: str | os.PathLike[str] | None) -> dict[str, str]:
    """``env`` with Triton's kernel cache in ``cwd``'s JIT_CACHE (an inherited TRITON_CACHE_DIR is
    overridden: a cache shared between copies is what this prevents)."""
    merged = dict(env)
    if cwd is not None:
        merged["TRITON_CACHE_DIR"] = str(Path(cwd).resolve() / JIT_CACHE)
    return merged


def clear_jit_cache(root: Path) -> None:
    shutil.rmtree(root / JIT_CACHE, ignore_errors=True)


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


def _drain(stream: IO[bytes], into: list[bytes]) -> None:
    into.append(stream.read())


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait for the process to exit, at most ``timeout_s``; True when it did.

    Popen.wait(timeout) polls with sleeps of up to 50 ms; a pidfd wakes us the moment the process exits,
    which matters when the traced run is timed against a plain one (CUDA programs spend ~100 ms exiting
    after closing their output)."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux >= 5.3, or already reaped
        try:
            proc.wait(timeout=max(timeout_s, 0))
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(timeout_s, 0) * 1000):
            return False
    finally:
        os.close(pidfd)
    proc.wait()
    return True


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
    deadline = time.monotonic() + timeout_s
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
    assert proc.stdout is not None and proc.stderr is not None
    outputs: tuple[list[bytes], list[bytes]] = ([], [])
    readers = [
        threading.Thread(target=_drain, args=(stream, sink), daemon=True)
        for stream, sink in zip((proc.stdout, proc.stderr), outputs, strict=True)
    ]
    timed_out = False
    try:
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(max(deadline - time.monotonic(), 0))
        exited = not any(r.is_alive() for r in readers) and _wait_exit(proc, deadline - time.monotonic())
        if not exited:
            timed_out = True
            _kill_group(proc)
            proc.wait()
            grace = time.monotonic() + 10
            for reader in readers:
                reader.join(max(grace - time.monotonic(), 0))
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    if any(r.is_alive() for r in readers):  # a process outside the group holds the pipes open
        stdout, stderr = b"", b"(output unavailable: a process outside the group kept the pipes open)"
    else:
        stdout, stderr = (b"".join(sink) for sink in outputs)
        proc.stdout.close()
        proc.stderr.close()
    return Completed(
        argv, proc.returncode, _decode(stdout), _decode(stderr), time.perf_counter() - start, timed_out
    )

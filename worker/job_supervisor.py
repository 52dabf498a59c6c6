"""The parent of one job's engine on a worker without containers: no process of the job outlives it.

The local executor runs ``python -m worker.job_supervisor --worker-pid PID --scratch DIR -- ENGINE...``.
The supervisor

- is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process the job starts stays its descendant when
  its own parent exits, also one that daemonizes (double fork, ``setsid``) or starts its own process group
  (the engine runs every tool in one), so it can always be found and killed;
- asks the kernel for SIGTERM when the worker dies (``PR_SET_PDEATHSIG``; it checks that the worker did not
  die before it asked, and unblocks the signal should the worker's thread have blocked it);
- on SIGTERM (the worker stops the job, or died) passes SIGTERM to the engine, which unwinds and stops its
  tools, and after ``--grace`` seconds kills every descendant left;
- when the engine exits, kills every descendant left (a build's stray daemon) and exits with the engine's
  status;
- when the worker died, removes the job's scratch folder.

What it cannot stop is a job that kills the supervisor itself first (it runs as the same user): only a
container, or another user for the job, isolates that. Standard library only: it starts before anything.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

__all__ = ["descendants", "kill_descendants", "main"]

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
DEFAULT_GRACE_S = 5.0
KILL_ROUNDS = 100


class Stop(Exception):
    """SIGTERM, SIGINT or SIGHUP arrived: stop the job."""


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}, {value}) failed: {os.strerror(errno)}")


def _parent_and_state(stat: str) -> tuple[int, str]:
    """(ppid, state) from /proc/PID/stat; its second field (the command, in parentheses) may hold anything."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[1]), fields[0]


def descendants(root: int) -> list[int]:
    """The live (not zombie) processes below ``root``, from /proc."""
    children: dict[int, list[int]] = {}
    zombies: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            parent, state = _parent_and_state(Path(entry.path, "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        pid = int(entry.name)
        children.setdefault(parent, []).append(pid)
        if state == "Z":
            zombies.add(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        below = children.get(frontier.pop(), [])
        found.extend(below)
        frontier.extend(below)
    return [pid for pid in found if pid not in zombies]


def _reap() -> dict[int, int]:
    """Reap every child that has exited: pid -> wait status."""
    reaped: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped[pid] = status


def kill_descendants() -> dict[int, int]:
    """SIGKILL every process below this one until none is left (orphans come to this subreaper); returns the
    wait statuses of the children reaped meanwhile."""
    reaped: dict[int, int] = {}
    for _ in range(KILL_ROUNDS):
        reaped |= _reap()
        left = descendants(os.getpid())
        if not left:
            return reaped | _reap()
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    return reaped | _reap()


def _raise_stop(_signum: int, _frame: FrameType | None) -> None:
    raise Stop


def _wait_for(engine: subprocess.Popen[bytes], timeout_s: float | None) -> int | None:
    """The engine's wait status once it exits (reaping orphans meanwhile), or None after ``timeout_s``."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        for pid, status in _reap().items():
            if pid == engine.pid:
                return status
        if deadline is not None and time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def _exit_code(status: int | None) -> int:
    if status is None:
        return 128 + signal.SIGKILL
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _worker_gone(worker_pid: int) -> bool:
    return os.getppid() != worker_pid


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def run(command: list[str], worker_pid: int, scratch: Path | None, grace_s: float) -> int:
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stop)
    # a signal mask survives fork and exec: started by a thread that blocks SIGTERM, the supervisor would
    # hold the parent-death signal pending forever and the job would outlive its worker
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    engine: subprocess.Popen[bytes] | None = None
    status: int | None = None
    try:
        if _worker_gone(worker_pid):  # the worker died before the kernel was asked to tell
            raise Stop
        engine = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        status = _wait_for(engine, None)
    except Stop:
        with contextlib.suppress(Stop):
            for signum in STOP_SIGNALS:
                signal.signal(signum, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
            if engine is not None and status is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(engine.pid, signal.SIGTERM)
                status = _wait_for(engine, grace_s)
    finally:
        for pid, reaped in kill_descendants().items():
            if engine is not None and pid == engine.pid and status is None:
                status = reaped
        if scratch is not None and _worker_gone(worker_pid):
            shutil.rmtree(scratch, ignore_errors=True)
    return _exit_code(status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.job_supervisor")
    parser.add_argument("--worker-pid", type=int, required=True, help="the worker that started this job")
    parser.add_argument("--scratch", type=Path, default=None, help="removed when the worker dies")
    parser.add_argument(
        "--grace", type=float, default=DEFAULT_GRACE_S, help="seconds the engine gets to stop"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the engine's command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    return run(command, args.worker_pid, args.scratch, args.grace)


if __name__ == "__main__":
    sys.exit(main())

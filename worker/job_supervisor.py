"""The parent of one job's engine on a worker without containers: no process of the job outlives it.

The local executor runs ``python -m worker.job_supervisor --worker-pid PID --scratch DIR -- ENGINE...``.
The supervisor

- is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process the job starts stays its descendant when
  its own parent exits, also one that daemonizes (double fork, ``setsid``) or starts its own process group
  (the engine runs every tool in one), so it can always be found and killed;
- asks the kernel for PARENT_DIED (SIGUSR1) when the thread that started it ends (``PR_SET_PDEATHSIG``:
  the kernel signals when that *thread* ends, also while the rest of the worker lives or is still being
  torn down by a SIGKILL), and then waits on a pidfd of the worker for the whole process to end: a worker
  that died stops the job, a worker that lives (one of its threads ended) keeps it running. It checks
  that the worker did not die before it asked, and unblocks the signals should the worker's thread have
  blocked them;
- on SIGTERM, SIGINT or SIGHUP (the worker stops the job), or when the worker died, passes SIGTERM to the
  engine, which unwinds and stops its tools, and after ``--grace`` seconds kills every descendant left;
- when the engine exits, kills every descendant left (a build's stray daemon) and exits with the engine's
  status;
- when the worker died, removes the job's scratch folder.

Signal handlers only set flags; the loops act on them, so no signal can cut a cleanup short or lose the
engine's reaped status.

What it cannot stop is a job that kills the supervisor itself first (it runs as the same user): only a
container, or another user for the job, isolates that. Standard library only: it starts before anything.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

__all__ = ["descendants", "kill_descendants", "main", "process_ended"]

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
DEFAULT_GRACE_S = 5.0
KILL_ROUNDS = 100


PARENT_DIED = signal.SIGUSR1
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
WORKER_EXIT_WAIT_S = 10.0
"""How long, after the thread that started the supervisor ended, the worker's process gets to end too
before the supervisor takes it for a live worker that lost a thread (a SIGKILL'd worker's threads end
within milliseconds of each other, more on a loaded machine)."""
POLL_S = 0.05


class Received:
    """What the signal handlers saw, for the loops to act on."""

    def __init__(self) -> None:
        self.stop = False
        self.parent_thread_ended = False

    def on_stop(self, _signum: int, _frame: FrameType | None) -> None:
        self.stop = True

    def on_parent_died(self, _signum: int, _frame: FrameType | None) -> None:
        self.parent_thread_ended = True


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


def process_ended(pidfd: int, timeout_s: float) -> bool:
    """Whether the process of ``pidfd`` has ended, waiting at most ``timeout_s``."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


def _open_worker(worker_pid: int) -> int | None:
    """A pidfd of the worker, or None when it has died already. The worker is this process's parent: once
    the pidfd is open, a parent pid still equal to ``worker_pid`` says the pidfd is the worker's, not a later
    process's that got its number."""
    try:
        pidfd = os.pidfd_open(worker_pid)
    except ProcessLookupError:
        return None
    if os.getppid() != worker_pid:
        os.close(pidfd)
        return None
    return pidfd


def _engine_status(engine: subprocess.Popen[bytes]) -> int | None:
    """The engine's wait status if it has exited, reaping every orphan that has too."""
    return _reap().get(engine.pid)


def _wait_for(engine: subprocess.Popen[bytes], timeout_s: float) -> int | None:
    """The engine's wait status once it exits (reaping orphans meanwhile), or None after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while (status := _engine_status(engine)) is None:
        if time.monotonic() > deadline:
            return None
        time.sleep(POLL_S)
    return status


def _supervise(
    engine: subprocess.Popen[bytes], worker: int, received: Received, exit_wait_s: float
) -> tuple[int | None, bool]:
    """Wait for the engine to exit, or for a stop, or for the worker's death: (the engine's wait status or
    None, whether the worker died)."""
    while True:
        if (status := _engine_status(engine)) is not None:
            return status, False
        if received.parent_thread_ended:
            received.parent_thread_ended = False
            if process_ended(worker, exit_wait_s):
                return None, True
            # a thread of a live worker ended: the job goes on, and the kernel signals again when the thread
            # it now counts as the parent ends
        if received.stop:
            return None, False
        time.sleep(POLL_S)


def _exit_code(status: int | None) -> int:
    if status is None:
        return 128 + signal.SIGKILL
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def run(
    command: list[str],
    worker_pid: int,
    scratch: Path | None,
    grace_s: float,
    exit_wait_s: float = WORKER_EXIT_WAIT_S,
) -> int:
    received = Received()
    for signum in STOP_SIGNALS:
        signal.signal(signum, received.on_stop)
    signal.signal(PARENT_DIED, received.on_parent_died)
    # a signal mask survives fork and exec: started by a thread that blocks these, the supervisor would
    # hold the parent-death signal pending forever and the job would outlive its worker
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (*STOP_SIGNALS, PARENT_DIED))
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    worker = _open_worker(worker_pid)
    _prctl(PR_SET_PDEATHSIG, PARENT_DIED)
    worker_died = worker is None or os.getppid() != worker_pid  # also: died before the kernel was asked
    engine: subprocess.Popen[bytes] | None = None
    status: int | None = None
    try:
        if not worker_died and worker is not None:
            engine = subprocess.Popen(command, stdin=subprocess.DEVNULL)
            status, worker_died = _supervise(engine, worker, received, exit_wait_s)
        if engine is not None and status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(engine.pid, signal.SIGTERM)
            status = _wait_for(engine, grace_s)
    finally:
        for pid, reaped in kill_descendants().items():
            if engine is not None and pid == engine.pid and status is None:
                status = reaped
        if worker is not None and not worker_died:
            worker_died = process_ended(worker, exit_wait_s if received.parent_thread_ended else 0)
        if scratch is not None and worker_died:
            shutil.rmtree(scratch, ignore_errors=True)
        if worker is not None:
            os.close(worker)
    return _exit_code(status)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m worker.job_supervisor")
    parser.add_argument("--worker-pid", type=int, required=True, help="the worker that started this job")
    parser.add_argument("--scratch", type=Path, default=None, help="removed when the worker dies")
    parser.add_argument(
        "--grace", type=float, default=DEFAULT_GRACE_S, help="seconds the engine gets to stop"
    )
    parser.add_argument(
        "--worker-exit-wait",
        type=float,
        default=WORKER_EXIT_WAIT_S,
        help="seconds the worker gets to end after the thread that started this supervisor ended",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the engine's command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    return run(command, args.worker_pid, args.scratch, args.grace, args.worker_exit_wait)


if __name__ == "__main__":
    sys.exit(main())

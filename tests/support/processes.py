"""The live processes of this machine, from /proc: what tests and benchmarks look for after a job ends, and
how they kill what they left without hitting another test's process.

A pid is a number the kernel hands out again once its process is reaped (this machine's pid_max is 32768,
and a test run starts tens of thousands of processes), so a kill by a pid or group id read earlier can
reach a process of another test running beside it: a job supervisor killed that way leaves its job
running. ``kill_named`` signals through a pidfd opened while the process is known to be the one meant;
``end_group`` ends a process group while its leader is still unreaped, which keeps the group id from
being handed out again."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from worker.job_supervisor import process_ended

__all__ = ["Process", "end_group", "exited", "group_members", "kill_named", "live_processes", "named"]


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    group: int
    argv: list[bytes]


def live_processes() -> Iterator[Process]:
    """Every process that has not exited (zombies left out), with its parent and command line."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            state, parent, group = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[:3]
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if state != "Z":
            yield Process(int(entry.name), int(parent), int(group), argv)


def named(prefix: str) -> list[int]:
    """Processes whose name (argv[0], as ``exec -a`` sets it) starts with ``prefix``."""
    return [p.pid for p in live_processes() if p.argv[0].startswith(prefix.encode())]


def kill_named(pids: list[int], needle: str) -> list[int]:
    """SIGKILL those of ``pids`` whose command line still holds ``needle`` (a job's token): each through a
    pidfd opened before its command line is read, so a number handed out again in between is never
    signalled. The pids killed."""
    killed = []
    for pid in pids:
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if needle.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                killed.append(pid)
        except OSError:
            pass  # gone meanwhile
        finally:
            os.close(pidfd)
    return killed


def group_members(group: int) -> list[int]:
    """The live (not zombie) processes of process group ``group``."""
    return [p.pid for p in live_processes() if p.group == group]


def exited(pid: int, timeout_s: float) -> bool:
    """Whether child ``pid`` exits within ``timeout_s``, without reaping it (a pidfd turns readable)."""
    pidfd = os.pidfd_open(pid)
    try:
        return process_ended(pidfd, max(timeout_s, 0))
    finally:
        os.close(pidfd)


def end_group(leader: int, steps: tuple[tuple[signal.Signals, float], ...]) -> None:
    """Each (signal, seconds) in turn to the group whose leader is the unreaped child ``leader``, until no
    live process is left in it. The caller reaps the leader afterwards: while it is a zombie, its number,
    the group id, cannot be another process's."""
    for signum, wait_s in steps:
        if not group_members(leader):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader, signum)
        deadline = time.monotonic() + wait_s
        while group_members(leader) and time.monotonic() < deadline:
            time.sleep(0.1)

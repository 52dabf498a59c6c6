"""The live processes of this machine, from /proc: what tests and benchmarks look for after a job ends."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Process", "live_processes", "named"]


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    argv: list[bytes]


def live_processes() -> Iterator[Process]:
    """Every process that has not exited (zombies left out), with its parent and command line."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            state, parent = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[:2]
            argv = Path(entry.path, "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if state != "Z":
            yield Process(int(entry.name), int(parent), argv)


def named(prefix: str) -> list[int]:
    """Processes whose name (argv[0], as ``exec -a`` sets it) starts with ``prefix``."""
    return [p.pid for p in live_processes() if p.argv[0].startswith(prefix.encode())]

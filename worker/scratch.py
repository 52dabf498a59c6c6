"""Each job's scratch folder on the worker, and the removal of those a dead worker left behind.

A job's folder (``intelliperf-job-<id>-*`` in the work folder) holds its project, its output, and its home
and temporary folders. It names the worker process that made it (``OWNER_FILE``: its pid and start time,
so a reused pid is not taken for it). Normally the job's end removes it; a worker killed mid-job leaves
it, and then its job's supervisor removes it (worker.job_supervisor), or, failing that, the next worker to
start on the host (``remove_orphaned``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["OWNER_FILE", "PREFIX", "job_scratch", "process_identity", "remove_orphaned"]

log = logging.getLogger(__name__)

PREFIX = "intelliperf-job-"
OWNER_FILE = ".intelliperf-owner"


def process_identity(pid: int) -> str | None:
    """``pid`` and its start time (clock ticks since boot), or None when no such process runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return f"{pid} {fields[19]}"


@contextlib.contextmanager
def job_scratch(job_id: str, work_dir: Path | None) -> Iterator[Path]:
    """A new scratch folder for ``job_id``, owned by this process, removed at the end."""
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{job_id[:8]}-", dir=work_dir) as folder:
        scratch = Path(folder)
        (scratch / OWNER_FILE).write_text(process_identity(os.getpid()) or "")
        yield scratch


def remove_orphaned(work_dir: Path | None) -> list[Path]:
    """Remove the job folders in ``work_dir`` (default: the system's temporary folder) whose owner process
    is gone; returns them. A folder without an owner file is left alone (not ours to judge)."""
    root = Path(work_dir or tempfile.gettempdir())
    removed = []
    for folder in sorted(root.glob(f"{PREFIX}*")):
        try:
            owner = (folder / OWNER_FILE).read_text().strip()
        except OSError:
            continue
        pid = owner.split(" ", 1)[0]
        if owner and pid.isdigit() and process_identity(int(pid)) == owner:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    if removed:
        log.warning("removed %d scratch folder(s) of jobs whose worker died: %s", len(removed), removed)
    return removed

"""The worker's side of counter reuse: a job's repository's entries come from the service before the job,
and what a job that publishes measured goes back to it after, so reuse does not depend on which node runs
the job, and a node keeps nothing between jobs.

A job is untrusted code: it reads its own copy of the entries (``FOLDER`` in its scratch folder, mounted
read-only in its container) and writes its new entries into its output (``OUTPUT``). After a job that
publishes (``JobSpec.publishes_counters``: cloned from the base branch its spec tracks, so a pull
request's code never decides what later pushes reuse; an uploaded archive never publishes, whatever ref its
spec names, though it reads the entries), the worker uploads each file there that is an entry's (a plain
file under an entry's name, within the size limit); the service checks each one again before keeping it
(service.counter_entries) and says why it refuses one, which refuses that one only. The service knows the
job's repository: a job sees no other's entries, and a job without a repository gets none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from intelliperf.contract.counters import COUNTER_KEY, entry_bytes, refusal_reason
from worker.service_client import ContentRefused, ServiceClient

__all__ = ["FOLDER", "OUTPUT", "Published", "download", "publish"]

OUTPUT = "counters"
"""The folder of a job's output where its engine writes new entries."""
FOLDER = "counters"
"""The folder of a job's scratch where the worker puts its repository's entries for the job to read."""
_ENTRY = re.compile(COUNTER_KEY.removesuffix("$") + r"\.json$")


def download(service: ServiceClient, job_id: str, run_id: str, folder: Path) -> int:
    """Write the entries of the job's repository into ``folder`` (made if new); returns how many. An entry
    dropped by the service since it was listed is left out."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for entry in service.counter_entries(job_id, run_id):
        body = service.counter_entry(job_id, run_id, entry.key)
        if body is not None:
            (folder / f"{entry.key}.json").write_bytes(body)
            written += 1
    return written


@dataclass(frozen=True)
class Published:
    kept: int
    refused: list[str]


def publish(service: ServiceClient, job_id: str, run_id: str, written: Path) -> Published:
    """Upload the entries of ``written`` (a job's output) to the service; say why the others were refused,
    here or by the service. Each file is read once: the bytes checked are the bytes sent. A service that
    cannot be reached raises ServiceError."""
    kept, refused = 0, []
    if not written.is_dir():
        return Published(0, [])
    for path in sorted(written.iterdir()):
        body = _readable(path)
        if isinstance(body, str):
            refused.append(f"{path.name}: {body}")
            continue
        try:
            service.put_counter_entry(job_id, run_id, path.name.removesuffix(".json"), body)
        except ContentRefused as refusal:
            refused.append(f"{path.name}: {refusal.reason}")
            continue
        kept += 1
    return Published(kept, refused)


def _readable(path: Path) -> bytes | str:
    """The bytes of an entry's file, or why the file is none."""
    if path.is_symlink() or not path.is_file():
        return "not a plain file"
    if not _ENTRY.fullmatch(path.name):
        return "not an entry's name"
    try:
        return entry_bytes(path)
    except (OSError, ValueError) as error:
        return refusal_reason(error)

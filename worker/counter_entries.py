"""The worker's counters between jobs: a folder per repository, read by every job of that repository and
written only by the worker, from what a job on its tracked base branch left in its output.

A job is untrusted code: it sees its repository's folder read-only (mounted so in its container) and writes
its new entries into its own output folder. After the job, the worker checks each entry (a well-formed
`StoredCounters` under the name its key gives, below the size limit) and moves it into the repository's
folder, but only for a job on the base branch its spec tracks (`track.base_branch`): code that reached the
branch, not a pull request's, decides what later pushes reuse. Jobs of other repositories never see the
folder, and a job without a repository gets none.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from intelliperf.contract import JobSpec
from intelliperf.engine.counter_store import entry_bytes, read_entry

__all__ = ["OUTPUT", "Published", "default_root", "publish", "publishes", "repository_folder"]

OUTPUT = "counters"
"""The folder of a job's output where its engine writes new entries."""
_ENTRY = re.compile(r"[0-9a-f]{64}\.json")


def default_root(jobs_dir: Path | None) -> Path:
    if jobs_dir is not None:
        return jobs_dir / "counters"
    return Path(tempfile.gettempdir()) / "intelliperf-counters"


def repository_folder(root: Path, repository: str | None) -> Path | None:
    """The folder of ``repository`` (owner/name) under ``root``: its name is a hash of the name in lower
    case, so no name can reach outside ``root`` or another repository's folder."""
    if not repository:
        return None
    return root / hashlib.sha256(repository.lower().encode()).hexdigest()[:32]


def publishes(spec: JobSpec) -> bool:
    """Whether the job's new counters are kept for later jobs: a job on the base branch it tracks."""
    if spec.track is None or spec.repository is None:
        return False
    return spec.repository.ref.removeprefix("refs/heads/") == spec.track.base_branch


@dataclass(frozen=True)
class Published:
    kept: int
    refused: list[str]


def publish(written: Path, folder: Path) -> Published:
    """Move the well-formed entries of ``written`` (a job's output) into ``folder``; say why the others
    were refused. Each entry is read once: the bytes checked are the bytes kept."""
    kept, refused = 0, []
    if not written.is_dir():
        return Published(0, [])
    folder.mkdir(parents=True, exist_ok=True)
    for path in sorted(written.iterdir()):
        checked = _checked(path)
        if isinstance(checked, str):
            refused.append(f"{path.name}: {checked}")
            continue
        staged = folder / f".{path.name}.partial"
        staged.write_bytes(checked)
        staged.replace(folder / path.name)
        kept += 1
    return Published(kept, refused)


def _checked(path: Path) -> bytes | str:
    """The entry's bytes, or why it is refused."""
    if path.is_symlink() or not path.is_file():
        return "not a plain file"
    if not _ENTRY.fullmatch(path.name):
        return "not an entry's name"
    try:
        data = entry_bytes(path)
        read_entry(data, path.name.removesuffix(".json"))
    except (OSError, ValueError) as error:
        return str(error).splitlines()[0] or type(error).__name__
    return data

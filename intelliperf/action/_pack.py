"""The project as a tar.gz: the files git would keep (tracked, or untracked and not ignored), never .git.

In a git work tree the file list comes from ``git ls-files --cached --others --exclude-standard``, so
.gitignore (and .git/info/exclude) are respected; elsewhere every file is packed except .git folders.
Symbolic links are packed as links (the service refuses ones that leave the project).
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PackError", "Packed", "pack_project"]

GIT_TIMEOUT_S = 120


class PackError(RuntimeError):
    """The project cannot be packed (no such folder, unreadable file)."""


@dataclass(frozen=True)
class Packed:
    data: bytes
    files: int
    gitignore: bool
    """Whether .gitignore was respected (the folder is a git work tree and git ran)."""


def _git_files(root: Path) -> list[str] | None:
    try:
        argv = ["git", "-c", f"safe.directory={root}", "-C", str(root), "ls-files", "-z"]
        result = subprocess.run(
            [*argv, "--cached", "--others", "--exclude-standard"],
            capture_output=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    names = [name for name in result.stdout.decode("utf-8", "surrogateescape").split("\0") if name]
    return sorted(set(names))


def _walk(root: Path, relative: str = "") -> list[str]:
    """Files under root/relative (relative to root), .git folders left out, linked folders as links."""
    names: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root / relative if relative else root):
        here = Path(dirpath)
        base = here.relative_to(root)
        linked = [d for d in dirnames if (here / d).is_symlink()]
        dirnames[:] = sorted(d for d in dirnames if d != ".git" and d not in linked)
        names += [(base / f).as_posix() for f in sorted(filenames + linked)]
    return names


def pack_project(root: Path, exclude: frozenset[str] = frozenset()) -> Packed:
    """``exclude``: paths relative to root left out (the Action's own report and diff)."""
    if not root.is_dir():
        raise PackError(f"{root} is not a folder")
    listed = _git_files(root)
    names = listed if listed is not None else _walk(root)
    buffer = io.BytesIO()
    count = 0
    # gzip's header time fixed: the same files pack to the same bytes, so a retried submission with
    # the same Idempotency-Key is recognised as the same job
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive,
    ):
        for name in names:
            path = root / name
            if ".git" in Path(name).parts or name in exclude:
                continue
            if path.is_dir() and not path.is_symlink():  # a submodule's gitlink: pack its files
                for inner in _walk(root, name):
                    archive.add(root / inner, arcname=inner, recursive=False)
                    count += 1
                continue
            if not path.is_symlink() and not path.is_file():
                continue  # deleted in the work tree but still in the index, a socket, ...
            try:
                archive.add(path, arcname=name, recursive=False)
            except OSError as exc:
                raise PackError(f"cannot pack {name}: {exc.strerror}") from None
            count += 1
    return Packed(data=buffer.getvalue(), files=count, gitignore=listed is not None)

"""A job's reproducer folder packed for the service: a gzipped tar holding ``reproducer/<file>`` for each of
accordo.reproducer's files, so that `tar -xzf` then `intelliperf replay reproducer` runs it."""

from __future__ import annotations

import tarfile
from pathlib import Path

from accordo.reproducer import REPRODUCER_FILES

__all__ = ["ARCHIVE_FOLDER", "pack_reproducer", "reproducer_paths"]

ARCHIVE_FOLDER = "reproducer"


def reproducer_paths(folder: Path | None) -> list[Path] | None:
    """The reproducer's files in ``folder``, or None when it holds no complete reproducer (each file must be a
    regular file of its own: none is followed through a link)."""
    if folder is None or not folder.is_dir():
        return None
    paths = [folder / name for name in REPRODUCER_FILES]
    return paths if all(p.is_file() and not p.is_symlink() for p in paths) else None


def pack_reproducer(paths: list[Path], tarball: Path) -> Path:
    """The reproducer's files (``reproducer_paths``) as the gzipped tar ``tarball``."""
    with tarfile.open(tarball, "w:gz", compresslevel=1) as archive:  # captures are mostly float noise
        for path in paths:
            archive.add(path, arcname=f"{ARCHIVE_FOLDER}/{path.name}", recursive=False)
    return tarball

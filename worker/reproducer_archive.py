"""A job's reproducer folder packed for the service: a gzipped tar holding ``reproducer/<file>`` for each of
accordo.reproducer's files, so that `tar -xzf` then `intelliperf replay reproducer` runs it."""

from __future__ import annotations

import tarfile
from pathlib import Path

from accordo.reproducer import REPRODUCER_FILES

__all__ = ["ARCHIVE_FOLDER", "pack_reproducer"]

ARCHIVE_FOLDER = "reproducer"


def pack_reproducer(folder: Path, tarball: Path) -> Path | None:
    """``folder``'s reproducer files as the gzipped tar ``tarball``; None when the folder holds no complete
    reproducer (no file of it is followed through a link)."""
    paths = [folder / name for name in REPRODUCER_FILES]
    if not all(p.is_file() and not p.is_symlink() for p in paths):
        return None
    with tarfile.open(tarball, "w:gz", compresslevel=1) as archive:  # captures are mostly float noise
        for path in paths:
            archive.add(path, arcname=f"{ARCHIVE_FOLDER}/{path.name}", recursive=False)
    return tarball

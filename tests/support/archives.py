"""Hostile project archives for tests and benchmarks of the upload path."""

from __future__ import annotations

import tarfile
from pathlib import Path

__all__ = ["gzip_bomb"]

_CHUNK = 2**20


class _Zeros:
    """A file of ``size`` zero bytes that is never held in memory."""

    def __init__(self, size: int) -> None:
        self._left = size
        self._chunk = bytes(_CHUNK)

    def read(self, size: int = -1) -> bytes:
        count = self._left if size < 0 else min(size, self._left)
        count = min(count, _CHUNK)
        self._left -= count
        return self._chunk[:count]


def gzip_bomb(path: Path, content_bytes: int) -> Path:
    """A tar.gz at ``path`` holding one file of ``content_bytes`` zeros (500 MiB compress to about
    500 KiB), written as a stream. A valid project archive: it is refused only by a limit on content."""
    with tarfile.open(path, mode="w:gz", compresslevel=6) as archive:
        info = tarfile.TarInfo("zeros.bin")
        info.size = content_bytes
        info.mode = 0o644
        archive.addfile(info, _Zeros(content_bytes))
    return path

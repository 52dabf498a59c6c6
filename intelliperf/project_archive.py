"""Unpacking a project uploaded as a tar.gz, safely: the service extracts archives that strangers send.

Every member is checked before anything is written: no absolute paths, no ``..``, no device files or
FIFOs, links only to targets inside the project, at most ``max_members`` members and ``max_bytes`` of
content in all. Extraction goes to a temporary folder next to the destination, which is renamed into
place only when everything succeeded, so a rejected archive leaves nothing half-written.
"""

from __future__ import annotations

import copy
import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

__all__ = ["ArchiveError", "ArchiveLimits", "check_project", "extract_project"]


MAX_NAME_BYTES = 255
"""The longest file name Linux file systems take (NAME_MAX): checked up front, not found by extracting."""


HAS_EXTRACTION_FILTERS = hasattr(tarfile, "data_filter")
"""Python 3.11.4 and later (PEP 706); Debian 12's 3.11.2 has none, and workers may run on it."""


def as_plain_data(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """What tarfile's "data" filter makes of a member that passed ``_checked_members``, for Pythons without
    it: no set-uid, set-gid or sticky bit, nobody but the owner may write, and the extracting user owns it."""
    plain = copy.copy(member)
    plain.mode = member.mode & 0o755 if member.isreg() or member.isdir() else member.mode
    if member.isreg() and not member.mode & 0o100:
        plain.mode &= 0o644
    plain.uid, plain.gid, plain.uname, plain.gname = os.getuid(), os.getgid(), "", ""
    return plain


class ArchiveError(ValueError):
    """The archive is refused; the message names the member and the rule it breaks."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_upload_bytes: int = 64 * 2**20
    max_bytes: int = 512 * 2**20  # uncompressed content
    max_members: int = 20_000


def _member_path(member: tarfile.TarInfo) -> PurePosixPath:
    name = member.name
    path = PurePosixPath(name)
    if not name or path.is_absolute() or name.startswith(("\\", "//")) or ":" in (path.parts or ("",))[0]:
        raise ArchiveError(f"{name!r}: absolute paths are not allowed in the project archive")
    if ".." in path.parts:
        raise ArchiveError(f"{name!r}: '..' is not allowed in the project archive")
    if any(len(part.encode()) > MAX_NAME_BYTES for part in path.parts):
        raise ArchiveError(f"{name!r}: a file or folder name is longer than {MAX_NAME_BYTES} bytes")
    return path


def _check_link(member: tarfile.TarInfo, path: PurePosixPath) -> None:
    target = PurePosixPath(member.linkname)
    if target.is_absolute():
        raise ArchiveError(f"{member.name!r}: links to absolute paths ({member.linkname!r}) are not allowed")
    # a symlink resolves from its own folder, a hard link from the archive's root
    base = path.parent if member.issym() else PurePosixPath()
    depth = 0
    for part in (base / target).parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            raise ArchiveError(f"{member.name!r}: the link to {member.linkname!r} leaves the project")


def _checked_members(archive: tarfile.TarFile, limits: ArchiveLimits) -> list[tarfile.TarInfo]:
    members = []
    total = 0
    for member in archive:
        if len(members) >= limits.max_members:
            raise ArchiveError(f"the archive holds more than {limits.max_members} members")
        path = _member_path(member)
        if member.issym() or member.islnk():
            _check_link(member, path)
        elif not (member.isfile() or member.isdir()):
            raise ArchiveError(f"{member.name!r}: only files, folders and links are allowed")
        total += member.size if member.isfile() else 0
        if total > limits.max_bytes:
            raise ArchiveError(f"the archive's content exceeds {limits.max_bytes} bytes uncompressed")
        members.append(member)
    if not members:
        raise ArchiveError("the archive is empty")
    return members


def check_project(data: bytes, limits: ArchiveLimits | None = None) -> int:
    """Every rule extract_project enforces, checked without writing a byte: the members' declared sizes
    are summed from their headers as the stream is read, so an archive that would expand past
    ``limits.max_bytes`` is refused at the member that crosses it, before anything is unpacked.
    Returns the number of members."""
    limits = limits or ArchiveLimits()
    if len(data) > limits.max_upload_bytes:
        raise ArchiveError(f"the upload is {len(data)} bytes; the limit is {limits.max_upload_bytes}")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
            return len(_checked_members(archive, limits))
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ArchiveError(f"not a readable tar.gz archive: {exc}") from None


def extract_project(data: bytes, destination: Path, limits: ArchiveLimits | None = None) -> Path:
    """Extract the tar.gz ``data`` into ``destination`` (which must not exist yet); returns it."""
    limits = limits or ArchiveLimits()
    if len(data) > limits.max_upload_bytes:
        raise ArchiveError(f"the upload is {len(data)} bytes; the limit is {limits.max_upload_bytes}")
    if destination.exists():
        raise FileExistsError(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".extract-", dir=destination.parent))
    try:
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
                members = _checked_members(archive, limits)
                if HAS_EXTRACTION_FILTERS:
                    archive.extractall(staging, members=members, filter="data")
                else:
                    archive.extractall(staging, members=[as_plain_data(m) for m in members])
        except (tarfile.TarError, EOFError, OSError) as exc:
            # the message may name the server's scratch folder: the uploader learns the member, not the path
            reason = str(exc).replace(str(staging), "<project>").replace(str(destination.parent), "<server>")
            raise ArchiveError(f"not a readable tar.gz archive: {reason}") from None
        os.replace(staging, destination)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return destination

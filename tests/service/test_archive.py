"""Uploaded project archives: what is extracted, and every hostile shape refused with nothing written."""

from __future__ import annotations

import io
import os
import re
import stat
import tarfile
import tempfile
from pathlib import Path

import pytest

from intelliperf import project_archive
from intelliperf.project_archive import ArchiveError, ArchiveLimits, check_project, extract_project


def archive(
    *members: tuple[str, str | bytes | None], links: dict[str, tuple[str, bool]] | None = None
) -> bytes:
    """A tar.gz of files (name, content) and folders (name, None); ``links``: name -> (target, symbolic)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, content in members:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            data = content.encode() if isinstance(content, str) else content
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for name, (target, symbolic) in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE if symbolic else tarfile.LNKTYPE
            info.linkname = target
            tar.addfile(info)
    return buffer.getvalue()


def leftovers(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir())


def test_a_project_is_extracted_with_its_folders_and_inner_links(tmp_path: Path) -> None:
    data = archive(
        ("proj", None), ("proj/Makefile", "all:\n"), ("proj/src/k.cu", "__global__ void k() {}\n"),
        links={"proj/kernel.cu": ("src/k.cu", True)},
    )  # fmt: skip
    out = extract_project(data, tmp_path / "job-1")
    assert (out / "proj" / "src" / "k.cu").read_text().startswith("__global__")
    assert (out / "proj" / "kernel.cu").resolve() == (out / "proj" / "src" / "k.cu").resolve()
    assert leftovers(tmp_path) == ["job-1"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (archive(("/etc/passwd", "x")), "absolute paths"),
        (archive(("proj/../../escape", "x")), "'..'"),
        (archive(("proj/a", "x"), links={"proj/link": ("../../etc", True)}), "leaves the project"),
        (archive(("proj/a", "x"), links={"proj/abs": ("/etc/passwd", True)}), "absolute paths"),
        (archive(("proj/a", "x"), links={"proj/hard": ("../outside", False)}), "leaves the project"),
        (b"this is not gzip", "not a readable tar.gz"),
        (archive(), "empty"),
    ],
    ids=["absolute", "dotdot", "symlink-escape", "symlink-absolute", "hardlink-escape", "garbage", "empty"],
)
def test_hostile_archives_are_refused_and_nothing_is_written(
    tmp_path: Path, data: bytes, message: str
) -> None:
    with pytest.raises(ArchiveError, match=message):
        extract_project(data, tmp_path / "job")
    assert leftovers(tmp_path) == []


def test_device_files_are_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("proj/dev")
        info.type = tarfile.CHRTYPE
        tar.addfile(info)
    with pytest.raises(ArchiveError, match="only files, folders and links"):
        extract_project(buffer.getvalue(), tmp_path / "job")


def test_size_and_member_limits(tmp_path: Path) -> None:
    big = archive(("proj/zeros.bin", b"\0" * 200_000))  # compresses to a few hundred bytes
    with pytest.raises(ArchiveError, match="exceeds 100000 bytes uncompressed"):
        extract_project(big, tmp_path / "a", ArchiveLimits(max_bytes=100_000))
    with pytest.raises(ArchiveError, match="the upload is"):
        extract_project(big, tmp_path / "b", ArchiveLimits(max_upload_bytes=100))
    many = archive(*((f"proj/f{i}", "x") for i in range(11)))
    with pytest.raises(ArchiveError, match="more than 10 members"):
        extract_project(many, tmp_path / "c", ArchiveLimits(max_members=10))
    assert leftovers(tmp_path) == []


def test_an_unwritable_member_is_refused_without_naming_the_servers_folders(tmp_path: Path) -> None:
    """A member the file system refuses (a file inside what is already a file): the OS error names the
    full server path; the uploader is told the member only."""
    scratch = tmp_path / "server-scratch-folder"
    with pytest.raises(ArchiveError) as refused:
        extract_project(archive(("src/k.cu", "x"), ("src/k.cu/inner.cu", "y")), scratch / "project")
    message = str(refused.value)
    assert "not a readable tar.gz archive" in message and "k.cu" in message
    assert str(tmp_path) not in message and "server-scratch-folder" not in message
    assert leftovers(scratch) == []


def test_a_name_no_file_system_takes_is_refused_by_its_rule(tmp_path: Path) -> None:
    data = archive(("src/" + "k" * 300 + ".cu", "x"))
    for check in (lambda: check_project(data), lambda: extract_project(data, tmp_path / "p")):
        with pytest.raises(ArchiveError, match="a file or folder name is longer than 255 bytes"):
            check()


def test_the_check_at_submit_enforces_the_extractions_rules_without_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the API runs on every upload: the same refusals as the worker's extraction, no file written."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    limits = ArchiveLimits(max_bytes=100_000, max_members=10)
    refused = {
        "exceeds 100000 bytes uncompressed": archive(("proj/zeros.bin", b"\0" * 200_000)),
        "more than 10 members": archive(*((f"proj/f{i}", "x") for i in range(11))),
        "leaves the project": archive(("proj/a", "x"), links={"proj/l": ("../../etc/passwd", True)}),
        "'..' is not allowed": archive(("proj/../x", "x")),
        "not a readable tar.gz archive": b"not a tar.gz at all",
    }
    for reason, data in refused.items():
        with pytest.raises(ArchiveError, match=re.escape(reason)):
            check_project(data, limits)
    assert check_project(archive(("proj", None), ("proj/k.cu", "x")), limits) == 2
    assert leftovers(tmp_path) == []


def test_a_zero_bomb_is_refused_at_the_member_that_crosses_the_limit() -> None:
    """510 KB that expand to 500 MiB (the issue's upload): refused from the member's header, the content
    never unpacked anywhere."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as tar:
        info = tarfile.TarInfo("proj/zeros.bin")
        info.size = 500 * 2**20
        tar.addfile(info, _Zeros(info.size))
    data = buffer.getvalue()
    assert len(data) < 1_000_000
    with pytest.raises(ArchiveError, match="exceeds 268435456 bytes uncompressed"):
        check_project(data, ArchiveLimits(max_bytes=256 * 2**20))


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n

    def readable(self) -> bool:
        return True


@pytest.mark.parametrize("filters", [True, False], ids=["python-filters", "older-python"])
def test_extracted_files_carry_no_special_mode_and_belong_to_the_extracting_user(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, filters: bool
) -> None:
    """Python before 3.11.4 (Debian 12's 3.11.2) has no extraction filters: the same result without them."""
    monkeypatch.setattr(project_archive, "HAS_EXTRACTION_FILTERS", filters)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, mode in (("setuid-tool", 0o6777), ("data.txt", 0o666), ("script.sh", 0o775)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid, info.uname = 1, mode, 4321, 4321, "somebody"
            archive.addfile(info, io.BytesIO(b"x"))
        folder = tarfile.TarInfo("shared")
        folder.type, folder.mode = tarfile.DIRTYPE, 0o1777
        archive.addfile(folder)
    root = extract_project(buffer.getvalue(), tmp_path / "project")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in root.iterdir()}
    assert modes == {"setuid-tool": 0o755, "data.txt": 0o644, "script.sh": 0o755, "shared": 0o755}
    assert {(p.stat().st_uid, p.stat().st_gid) for p in root.iterdir()} == {(os.getuid(), os.getgid())}

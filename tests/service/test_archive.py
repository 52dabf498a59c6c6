"""Uploaded project archives: what is extracted, and every hostile shape refused with nothing written."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from service.archive import ArchiveError, ArchiveLimits, extract_project


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
    """A name the file system refuses (one path component over 255 bytes): the OS error names the full
    server path; the uploader is told the member only."""
    scratch = tmp_path / "server-scratch-folder"
    with pytest.raises(ArchiveError) as refused:
        extract_project(archive(("src/" + "k" * 300 + ".cu", "x")), scratch / "project")
    message = str(refused.value)
    assert "not a readable tar.gz archive" in message and "k" * 300 in message
    assert str(tmp_path) not in message and "server-scratch-folder" not in message
    assert leftovers(scratch) == []

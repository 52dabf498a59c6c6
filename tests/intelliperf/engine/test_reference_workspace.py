"""The reference copy keeps Triton's cache from one run to the next, at a path that names the same copy
(issue 41: an autotuned Triton program's `intelliperf run` compiled every configuration again on every
run, 50 s against 14 s plain); a busy or foreign folder falls back to a fresh copy with an empty cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import intelliperf.engine.workspace as workspace_module
from intelliperf.engine.workspace import workspace
from intelliperf.process import JIT_CACHE


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("print(1)\n")
    (root / "gone.py").write_text("print(2)\n")
    return root


def compile_into(ws: Path, name: str = "k.cubin", size: int = 3) -> Path:
    cubin = ws / JIT_CACHE / "a1b2" / name
    cubin.parent.mkdir(parents=True, exist_ok=True)
    cubin.write_bytes(b"x" * size)
    return cubin


def reference_folders(root: Path) -> list[Path]:
    return sorted(root.glob("intelliperf-reference-*"))


def test_the_next_run_finds_the_kernels_at_the_same_path_with_the_projects_new_files(
    project: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with workspace(project, root=work, reference=True) as first:
        assert not (first / JIT_CACHE).exists()
        compile_into(first)
    (project / "gone.py").unlink()
    (project / "app.py").write_text("print(3)\n")
    with workspace(project, root=work, reference=True) as second:
        assert second == first
        assert (second / JIT_CACHE / "a1b2" / "k.cubin").read_bytes() == b"xxx"
        assert (second / "app.py").read_text() == "print(3)\n" and not (second / "gone.py").exists()
    [folder] = reference_folders(work)
    assert sorted(p.name for p in folder.iterdir()) == [".lock", "jit"]  # the copy itself is removed
    assert folder.stat().st_mode & 0o777 == 0o700


def test_a_plain_workspace_keeps_nothing(project: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with workspace(project, root=work) as ws:
        compile_into(ws)
    with workspace(project, root=work) as again:
        assert not (again / JIT_CACHE).exists()
    assert list(work.iterdir()) == []


def test_a_run_that_compiles_nothing_leaves_no_folder(project: Path, tmp_path: Path) -> None:
    with workspace(project, root=tmp_path, reference=True) as ws:
        assert ws.parent.parent.name.startswith("intelliperf-reference-")
    assert reference_folders(tmp_path) == []


def test_a_second_run_at_the_same_time_gets_a_fresh_copy(project: Path, tmp_path: Path) -> None:
    with workspace(project, root=tmp_path, reference=True) as first:
        compile_into(first)
    with workspace(project, root=tmp_path, reference=True) as held:
        with workspace(project, root=tmp_path, reference=True) as other:
            assert other != held and not other.parent.name.startswith("intelliperf-reference-")
            assert not (other / JIT_CACHE).exists()
        assert (held / JIT_CACHE / "a1b2" / "k.cubin").is_file()
    assert len(reference_folders(tmp_path)) == 1


def test_a_folder_others_may_enter_or_a_link_is_not_used(project: Path, tmp_path: Path) -> None:
    with workspace(project, root=tmp_path, reference=True) as ws:
        compile_into(ws)
    [folder] = reference_folders(tmp_path)
    folder.chmod(0o755)
    with workspace(project, root=tmp_path, reference=True) as ws:
        assert not ws.is_relative_to(folder) and not (ws / JIT_CACHE).exists()
    folder.chmod(0o700)
    elsewhere = tmp_path / "elsewhere"
    folder.rename(elsewhere)
    folder.symlink_to(elsewhere, target_is_directory=True)
    with workspace(project, root=tmp_path, reference=True) as ws:
        assert not ws.is_relative_to(folder) and not (ws / JIT_CACHE).exists()
    assert sorted(p.name for p in elsewhere.iterdir()) == [".lock", "jit"]  # untouched through the link


def test_a_kept_workspace_stays_and_the_next_run_takes_its_cache(project: Path, tmp_path: Path) -> None:
    with workspace(project, root=tmp_path, reference=True, keep=True) as kept:
        compile_into(kept)
    assert (kept / "app.py").is_file()
    with workspace(project, root=tmp_path, reference=True) as ws:
        assert (ws / JIT_CACHE / "a1b2" / "k.cubin").is_file()


def test_a_cache_over_the_bound_is_dropped_one_at_it_kept(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(workspace_module, "KEPT_JIT_CACHE_BYTES", 10)
    with workspace(project, root=tmp_path, reference=True) as ws:
        compile_into(ws, size=10)
    with workspace(project, root=tmp_path, reference=True) as ws:
        assert (ws / JIT_CACHE / "a1b2" / "k.cubin").is_file()
        compile_into(ws, name="more.cubin", size=1)
    with workspace(project, root=tmp_path, reference=True) as ws:
        assert not (ws / JIT_CACHE).exists()


def test_the_folder_is_named_by_the_user_and_the_projects_path(tmp_path: Path) -> None:
    names = set()
    for name in ("one", "two"):
        project = tmp_path / name / "app"
        project.mkdir(parents=True)
        with workspace(project, root=tmp_path, reference=True) as ws:
            compile_into(ws)
            names.add(ws.parent.parent.name)
    assert len(names) == 2
    assert all(name.startswith(f"intelliperf-reference-{os.getuid()}-") for name in names)

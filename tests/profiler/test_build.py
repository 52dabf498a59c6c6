"""libintelliperf_profiler.so builds here (no GPU needed) and does not depend on libcuda at link time."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from intelliperf.errors import NativeBuildError, ToolMissingError
from profiler import build
from profiler.build import CACHE_VARIABLE, LIBRARY_NAME


def _run(*cmd: str) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def test_exports_injection_entry_point(native_lib: Path) -> None:
    assert native_lib.is_file()
    defined = _run("nm", "-D", "--defined-only", str(native_lib))
    assert re.search(r"\bT InitializeInjection$", defined, re.MULTILINE)
    # Nothing else of ours is exported (hidden visibility).
    exported = [line.split()[-1] for line in defined.splitlines() if " T " in line]
    assert exported == ["InitializeInjection"]


def test_no_link_time_libcuda(native_lib: Path) -> None:
    undefined = _run("nm", "-D", "--undefined-only", str(native_lib))
    driver = [s for s in undefined.split() if re.fullmatch(r"cu[A-Z]\w*(@\S*)?", s)]
    assert driver == []
    dynamic = _run("readelf", "-d", str(native_lib))
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", dynamic)
    assert not any(lib.startswith("libcuda.") for lib in needed), needed
    assert any(lib.startswith("libcupti.so") for lib in needed), needed
    assert re.search(r"R(UN)?PATH.*lib64", dynamic)


def test_cached_build_is_reused(
    native_lib: Path, native_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_VARIABLE, str(native_cache))
    mtime = native_lib.stat().st_mtime_ns
    again = build.native_library()
    assert again == native_lib
    assert again.stat().st_mtime_ns == mtime
    assert again.parent.parent == native_cache
    assert re.fullmatch(r"[0-9a-f]{16}", again.parent.name)
    assert not list(again.parent.glob(".build-*")), "temporary build directories must be removed"


def test_missing_cuda_is_tool_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    with pytest.raises(ToolMissingError, match=r"cupti\.h"):
        build.native_library()


def test_missing_compiler_is_tool_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    with pytest.raises(ToolMissingError, match="no-such-compiler-xyz"):
        build.native_library()


def test_compile_error_is_native_build_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the Makefile and the headers, and one source that does not compile: the library's own sources are
    # left out, as compiling them (which native_lib does) would only make the failure take 15 s
    broken = tmp_path / "native"
    shutil.copytree(build.SOURCE_DIR, broken, ignore=shutil.ignore_patterns("*.cpp"))
    (broken / "broken.cpp").write_text("int f() { return not_declared_anywhere; }\n")
    monkeypatch.setattr(build, "SOURCE_DIR", broken)
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    with pytest.raises(NativeBuildError) as info:
        build.native_library()
    assert "not_declared_anywhere" in str(info.value)
    assert not list((tmp_path / "cache").rglob(LIBRARY_NAME))


def test_the_compiler_is_asked_its_version_once_per_build_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every timing pass looks the library up; running `g++ --version` there each time cost 3-4 ms of the
    pass. A compiler replaced in place (another modification time) is asked again."""
    asked = tmp_path / "asked"
    compiler = tmp_path / "fake-g++"
    compiler.write_text(f'#!/bin/sh\necho "$1" >> {asked}\necho "fake g++ 1.0"\n')
    compiler.chmod(0o755)
    monkeypatch.setenv("CXX", str(compiler))
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path / "cache"))
    try:
        first = build.cached_library()
    except ToolMissingError as missing:  # no CUDA toolkit on this machine: the version comes after it
        pytest.skip(str(missing))
    assert first is None and build.cached_library() is None
    assert asked.read_text() == "--version\n"
    stamp = compiler.stat().st_mtime_ns + 1_000_000_000
    os.utime(compiler, ns=(stamp, stamp))
    build.cached_library()
    assert asked.read_text() == "--version\n--version\n"

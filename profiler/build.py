"""Build libintelliperf_profiler.so, the native profiler (a CUPTI injection library), on first use.

The library lands in ``$INTELLIPERF_PROFILER_CACHE_DIR`` (default ``~/.cache/intelliperf/profiler``) under a
key made of the sources, the compiler's version and CUDA_HOME, so a changed source or toolchain builds a new
copy.
Builders race safely: each compiles in its own temporary directory and renames the result into place.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from intelliperf.errors import NativeBuildError, ToolMissingError, tail

__all__ = ["LIBRARY_NAME", "SOURCE_DIR", "cached_library", "cuda_home", "native_library"]

SOURCE_DIR = Path(__file__).resolve().parent / "native"
LIBRARY_NAME = "libintelliperf_profiler.so"
CACHE_VARIABLE = "INTELLIPERF_PROFILER_CACHE_DIR"
BUILD_TIMEOUT_S = 300


def cuda_home() -> Path:
    return Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")


def _sources() -> list[Path]:
    files = sorted(p for p in SOURCE_DIR.iterdir() if p.suffix in {".cpp", ".h"} or p.name == "Makefile")
    if not any(p.suffix == ".cpp" for p in files):
        raise NativeBuildError(f"the native profiler's sources are missing from {SOURCE_DIR}")
    return files


def _compiler() -> str:
    cxx = os.environ.get("CXX") or "g++"
    found = shutil.which(cxx)
    if found is None:
        raise ToolMissingError(
            f"the C++ compiler {cxx!r} is not installed; the native profiler needs it",
            hint="install g++ (e.g. apt-get install g++) or set CXX",
        )
    return found


def _compiler_version(cxx: str) -> str:
    """The compiler's first line of ``--version``, asked once per process for each build of the compiler:
    the library's path is looked up in every timing pass, and running the compiler there cost 3-4 ms of
    it."""
    try:
        found = os.stat(cxx)
    except OSError as exc:
        raise ToolMissingError(f"cannot run the C++ compiler {cxx}: {exc}") from exc
    return _version_of(cxx, found.st_mtime_ns, found.st_size)


@cache
def _version_of(cxx: str, mtime_ns: int, size: int) -> str:
    try:
        proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissingError(f"cannot run the C++ compiler {cxx}: {exc}") from exc
    lines = proc.stdout.splitlines()
    return lines[0] if lines else f"{cxx} (unknown version)"


def _check_cuda(home: Path) -> None:
    include_dirs = [home / "include", home / "extras" / "CUPTI" / "include"]
    lib_dirs = [home / "lib64", home / "extras" / "CUPTI" / "lib64"]
    missing = []
    if not any((d / "cuda.h").is_file() for d in include_dirs):
        missing.append("cuda.h")
    if not any((d / "cupti.h").is_file() for d in include_dirs):
        missing.append("cupti.h")
    if not any((d / "libcupti.so").exists() for d in lib_dirs):
        missing.append("libcupti.so")
    if missing:
        raise ToolMissingError(
            f"the CUDA toolkit at {home} lacks {', '.join(missing)}; "
            "the native profiler needs CUPTI's headers and library",
            hint="install the CUDA toolkit (with CUPTI) or point CUDA_HOME at it",
        )


def _cache_root() -> Path:
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "intelliperf" / "profiler"


def _build_key(sources: list[Path], compiler_version: str, home: Path) -> str:
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    digest.update(compiler_version.encode())
    digest.update(str(home.resolve()).encode())
    return digest.hexdigest()[:16]


def _text(output: str | bytes | None) -> str:
    if isinstance(output, bytes):
        return output.decode("utf-8", errors="replace")
    return output or ""


def _build_command(cxx: str, build_dir: Path, out: Path, home: Path) -> list[str]:
    make = shutil.which("make")
    if make is not None:
        return [make, "-s", "-C", str(build_dir), f"OUT={out}", f"CUDA_HOME={home}", f"CXX={cxx}"]
    # No make: the same command the Makefile runs.
    cupti_include = home / "extras" / "CUPTI" / "include"
    cupti_lib = home / "extras" / "CUPTI" / "lib64"
    cmd = [cxx, "-O2", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra"]
    cmd += [f"-I{home / 'include'}"] + ([f"-I{cupti_include}"] if cupti_include.is_dir() else [])
    cmd += sorted(str(p) for p in build_dir.glob("*.cpp"))
    cmd += ["-o", str(out), "-shared", f"-L{home / 'lib64'}", f"-Wl,-rpath,{home / 'lib64'}"]
    if cupti_lib.is_dir():
        cmd += [f"-L{cupti_lib}", f"-Wl,-rpath,{cupti_lib}"]
    cmd += ["-Wl,--no-undefined", "-Wl,--as-needed", "-Wl,--exclude-libs,ALL", "-lcupti", "-ldl", "-pthread"]
    return cmd


def _toolchain() -> tuple[Path, str, list[Path], Path]:
    """(CUDA home, C++ compiler, sources, where the library built from them with that toolchain is cached)."""
    home = cuda_home()
    cxx = _compiler()
    _check_cuda(home)
    sources = _sources()
    return (
        home,
        cxx,
        sources,
        _cache_root() / _build_key(sources, _compiler_version(cxx), home) / LIBRARY_NAME,
    )


def cached_library() -> Path | None:
    """The built library for these sources and this toolchain, or None when the next use must build it
    (about 15 s; `intelliperf prepare` builds it ahead). Raises as native_library does when the compiler
    or CUDA's headers are missing."""
    target = _toolchain()[3]
    return target if target.is_file() else None


def native_library(force: bool = False) -> Path:
    """Path to a built libintelliperf_profiler.so, compiling it first when no matching build is cached.

    Raises ToolMissingError when the compiler or CUDA's headers/CUPTI are missing and NativeBuildError
    (with the compiler's output) when compilation fails. ``force`` rebuilds even if a build is cached.
    """
    home, cxx, sources, target = _toolchain()
    if target.is_file() and not force:
        return target
    target_dir = target.parent

    try:
        target_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NativeBuildError(
            f"cannot create the native profiler's cache directory {target_dir}: {exc}"
        ) from exc
    with tempfile.TemporaryDirectory(prefix=".build-", dir=target_dir) as tmp:
        build_dir = Path(tmp)
        for path in sources:
            shutil.copy2(path, build_dir / path.name)
        out = build_dir / LIBRARY_NAME
        cmd = _build_command(cxx, build_dir, out, home)
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False, cwd=build_dir
            )
        except subprocess.TimeoutExpired as exc:
            raise NativeBuildError(
                f"building {LIBRARY_NAME} took longer than {BUILD_TIMEOUT_S} s",
                log_tail=tail(_text(exc.stdout) + _text(exc.stderr)),
            ) from exc
        except OSError as exc:
            raise ToolMissingError(f"cannot run {cmd[0]}: {exc}") from exc
        if proc.returncode != 0 or not out.is_file():
            raise NativeBuildError(
                f"building {LIBRARY_NAME} failed (exit code {proc.returncode}): {' '.join(cmd)}",
                log_tail=tail(proc.stdout + proc.stderr, 40),
            )
        os.replace(out, target)  # atomic: a concurrent builder's identical result is simply replaced
    return target

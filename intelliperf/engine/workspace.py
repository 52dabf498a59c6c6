"""The scratch copies the engine works in. The user's tree is never built in or edited; only
``--in_place`` writes the best validated rewrite back (``write_back``)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from pathlib import Path

from intelliperf.errors import SpecError
from intelliperf.process import JIT_CACHE

__all__ = ["copy_workspace", "relative_to_roots", "workspace", "write_back"]

IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.ncu-rep", ".venv", "node_modules", JIT_CACHE)


def relative_to_roots(*roots: Path) -> Callable[[str], str | None]:
    """A function that names an absolute file relative to the first of ``roots`` holding it (POSIX), and
    gives None for a relative file or one outside every root. The roots are resolved once, and each file
    once (a profile names the same few files in thousands of source rows)."""
    resolved = [Path(root).resolve() for root in roots]

    @cache
    def relative(file: str) -> str | None:
        if not Path(file).is_absolute():
            return None
        path = Path(file).resolve()
        root = next((root for root in resolved if path.is_relative_to(root)), None)
        return None if root is None else path.relative_to(root).as_posix()

    return relative


KEPT_JIT_CACHE_BYTES = 2 * 2**30
"""A reference copy's Triton cache larger than this is dropped rather than kept for the next run."""


@contextmanager
def workspace(
    project: Path, *, root: Path | None = None, keep: bool = False, reference: bool = False
) -> Iterator[Path]:
    """A copy of ``project`` in a fresh scratch directory, removed afterwards unless ``keep``.

    ``reference``: the copy the job measures the user's code in. It goes to a folder of ``root`` named
    after the project's path and the user, and Triton's cache (JIT_CACHE) is kept there from one run to
    the next: an autotuned Triton program then compiles once per change of its kernels, not on every run,
    and the kept kernels' line information names the same copy, so their source lines still map to the
    project. Where that folder is in use by another run, or is not the user's alone (another user made it,
    or a link), the copy goes to a fresh folder with an empty cache, as without ``reference``."""
    project = project.resolve()
    if not project.is_dir():
        raise SpecError(f"project directory {project} does not exist or is not a directory")
    with ExitStack() as stack:
        kept = stack.enter_context(_reference_folder(project, root)) if reference else None
        if kept is None:
            scratch = Path(tempfile.mkdtemp(prefix="intelliperf-", dir=root))
            cache_from = None
        else:
            scratch, cache_from = _fresh_run_folder(kept)
        copy = scratch / project.name
        shutil.copytree(project, copy, ignore=IGNORED, symlinks=True)
        if cache_from is not None:
            cache_from.rename(copy / JIT_CACHE)
        try:
            yield copy
        finally:
            if not keep:
                if kept is not None:
                    _keep_cache(copy / JIT_CACHE, kept / "jit")
                shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def _reference_folder(project: Path, root: Path | None) -> Iterator[Path | None]:
    """The project's reference folder, locked for this run; None where it is busy or not safe to use."""
    name = hashlib.sha256(str(project).encode()).hexdigest()[:16]
    folder = Path(root or tempfile.gettempdir()) / f"intelliperf-reference-{os.getuid()}-{name}"
    lock = _lock(folder)
    try:
        yield None if lock is None else folder
    finally:
        if lock is not None:
            _remove_if_empty(folder)
            os.close(lock)


def _remove_if_empty(folder: Path) -> None:
    """Remove the reference folder where it keeps nothing (no cache, no kept workspace)."""
    try:
        if all(entry.name == ".lock" for entry in folder.iterdir()):
            (folder / ".lock").unlink(missing_ok=True)
            folder.rmdir()
    except OSError:
        pass


def _lock(folder: Path) -> int | None:
    """An exclusive lock on ``folder`` (made private to the user if missing); None where another run holds
    it or the folder is not a directory of this user's that no one else may enter."""
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        found = folder.lstat()
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
            return None
        lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(lock).st_ino != (folder / ".lock").lstat().st_ino:  # the run before removed it
            raise BlockingIOError
    except OSError:
        os.close(lock)
        return None
    return lock


def _fresh_run_folder(folder: Path) -> tuple[Path, Path | None]:
    """Empty ``folder``'s run folder, keeping Triton's cache of the last run (left in the copy by a run
    that kept its workspace); the run folder and the cache to move into the new copy."""
    run, jit = folder / "run", folder / "jit"
    if run.is_dir() and not jit.exists():
        left = [cache for cache in run.glob(f"*/{JIT_CACHE}") if cache.is_dir()]
        if left:
            left[0].rename(jit)
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(exist_ok=True)
    if jit.is_dir() and _size(jit) > KEPT_JIT_CACHE_BYTES:
        shutil.rmtree(jit, ignore_errors=True)
    return run, jit if jit.is_dir() else None


def _keep_cache(cache: Path, into: Path) -> None:
    """Move the run's Triton cache aside for the next run; a cache that cannot be moved is dropped."""
    try:
        if cache.is_dir():
            cache.rename(into)
    except OSError:
        pass


def _size(folder: Path) -> int:
    """The bytes of the files in ``folder`` (links not followed, folders themselves not counted)."""
    sizes = (path.lstat() for path in folder.rglob("*"))
    return sum(found.st_size for found in sizes if stat.S_ISREG(found.st_mode))


def copy_workspace(source: Path, destination: Path) -> Path:
    """Another copy of a built workspace (build outputs and timestamps kept, so a rebuild after an edit
    recompiles only what the edit touched)."""
    shutil.copytree(source, destination, ignore=IGNORED, symlinks=True)
    return destination


def write_back(project: Path, files: dict[str, str], *, unchanged_since: Path) -> None:
    """Write ``files`` (project-relative path: new text) into the project, after checking that none of
    them changed there since ``unchanged_since`` (the copy the job started from) was taken: a file the
    user edited meanwhile is not overwritten."""
    root = project.resolve()
    targets = {}
    for relative in files:
        target = (root / relative).resolve()
        if not target.is_relative_to(root):
            raise SpecError(f"refusing to write {relative}: it is outside the project")
        original = unchanged_since / relative
        before = original.read_bytes() if original.is_file() else None
        now = target.read_bytes() if target.is_file() else None
        if before != now:
            raise SpecError(
                f"{relative} changed in the project while the job ran; the rewrite was not written back",
                hint="the report's diff holds the rewrite; apply it by hand",
            )
        targets[relative] = target
    for relative, text in files.items():
        targets[relative].parent.mkdir(parents=True, exist_ok=True)
        targets[relative].write_text(text)

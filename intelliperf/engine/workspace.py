"""The scratch copies the engine works in. The user's tree is never built in or edited; only
``--in_place`` writes the best validated rewrite back (``write_back``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


@contextmanager
def workspace(project: Path, *, root: Path | None = None, keep: bool = False) -> Iterator[Path]:
    """A copy of ``project`` in a fresh scratch directory, removed afterwards unless ``keep``."""
    project = project.resolve()
    if not project.is_dir():
        raise SpecError(f"project directory {project} does not exist or is not a directory")
    scratch = Path(tempfile.mkdtemp(prefix="intelliperf-", dir=root))
    copy = scratch / project.name
    shutil.copytree(project, copy, ignore=IGNORED, symlinks=True)
    try:
        yield copy
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)


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

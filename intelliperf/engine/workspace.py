"""The scratch copy the engine works in; the user's tree is touched only with --in_place."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from intelliperf.errors import SpecError

__all__ = ["workspace"]

IGNORED = shutil.ignore_patterns(".git", "__pycache__", "*.ncu-rep", ".venv", "node_modules")


@contextmanager
def workspace(
    project: Path, *, in_place: bool, root: Path | None = None, keep: bool = False
) -> Iterator[Path]:
    project = project.resolve()
    if not project.is_dir():
        raise SpecError(f"project directory {project} does not exist or is not a directory")
    if in_place:
        yield project
        return
    scratch = Path(tempfile.mkdtemp(prefix="intelliperf-", dir=root))
    copy = scratch / project.name
    shutil.copytree(project, copy, ignore=IGNORED, symlinks=True)
    try:
        yield copy
    finally:
        if not keep:
            shutil.rmtree(scratch, ignore_errors=True)

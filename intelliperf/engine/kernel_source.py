"""Where a kernel is defined in the project, for backends whose counters are per kernel (rocprofv3): the
diagnosis can then name the kernel's source file and its definition, though not the hot lines.

A kernel is found by its function's name: a `__global__` function (CUDA, HIP) or a `@triton.jit` one,
in the project's source files. Several definitions of one name (overloads, templates in several files)
give the first by path; none gives nothing, never a guess.
"""

from __future__ import annotations

import re
from pathlib import Path

from intelliperf.contract import Diagnosis, SourceLine, SourceLocation
from intelliperf.contract.kernel_names import function_name

__all__ = ["SOURCE_SUFFIXES", "at_kernel_definition", "find_kernel"]

SOURCE_SUFFIXES = (".hip", ".cu", ".cpp", ".cc", ".cxx", ".h", ".hpp", ".cuh", ".py")
CONTEXT = 4
MAX_BYTES = 2_000_000  # a generated or vendored giant is not where a kernel of the project is written
SKIPPED_DIRS = {".git", "build", "node_modules", "__pycache__", ".venv"}


def _definition(name: str) -> re.Pattern[str]:
    escaped = re.escape(name)
    return re.compile(
        rf"__global__[^;{{]*?\b{escaped}\s*(?:<[^>]*>\s*)?\(|@triton\.jit[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+{escaped}\s*\(",
        re.MULTILINE,
    )


def find_kernel(project: Path, demangled: str) -> tuple[str, int] | None:
    """(file relative to ``project``, line of the definition) of the kernel ``demangled`` names, or None."""
    name = function_name(demangled)
    if not name.isidentifier():
        return None
    pattern = _definition(name)
    for path in sorted(project.rglob("*")):
        if path.suffix not in SOURCE_SUFFIXES or not path.is_file() or SKIPPED_DIRS & set(path.parts):
            continue
        if path.stat().st_size > MAX_BYTES:
            continue
        text = path.read_text(errors="replace")
        match = pattern.search(text)
        if match is not None:
            line = text.count("\n", 0, match.end()) + 1
            return path.relative_to(project).as_posix(), line
    return None


def at_kernel_definition(diagnoses: list[Diagnosis], project: Path, demangled: str) -> list[Diagnosis]:
    """One kernel's diagnoses, the present ones without source lines pointed at its definition where it is
    found (the project is searched once, and only when some diagnosis needs it)."""
    if not any(d.present and not d.locations for d in diagnoses):
        return diagnoses
    found = find_kernel(project, demangled)
    if found is None:
        return diagnoses
    file, line = found
    lines = (project / file).read_text(errors="replace").splitlines()
    code = [
        SourceLine(line=n, text=lines[n - 1], hot=n == line)
        for n in range(max(1, line - CONTEXT), min(len(lines), line + CONTEXT) + 1)
    ]
    location = SourceLocation(file=file, line=line, share=1.0, metrics={"kernel definition": 1.0}, code=code)
    return [
        d.model_copy(update={"locations": [location]}) if d.present and not d.locations else d
        for d in diagnoses
    ]

"""Which kernels a project without CUDA or C++ source can own: only those its Python files name.

Library kernels are told by their names (`intelliperf.contract.kernel_names.LIBRARY_PREFIXES`), but a
PyTorch program launches kernels from more libraries than any list names (PyTorch's flash attention,
cuDNN's and cuBLAS's generated kernels, a wheel's extension, Inductor's generated Triton kernels). One of
them taken for the project's is profiled and then found without line information, and the diagnosis
stops with advice to rebuild with -lineinfo that a Python user cannot follow. A project with no CUDA or
C++ source compiled none of them: a kernel is its own only where one of its Python files names it (a
Triton kernel's `def`, a CUDA source in a string for `load_inline` or CuPy's `RawKernel`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from intelliperf.contract import RankedKernel
from intelliperf.contract.kernel_names import function_name

__all__ = ["NATIVE_SUFFIXES", "PYTHON_BYTES_LIMIT", "compiled_elsewhere", "has_native_source"]

NATIVE_SUFFIXES = frozenset(
    {".cu", ".cuh", ".cuf", ".hip", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl"}
)
SKIPPED_FOLDERS = frozenset({"site-packages", "dist-packages", "node_modules", "__pycache__"})
"""Installed packages (a virtual environment inside the project holds PyTorch's C++ headers) and caches;
folders whose name starts with a dot are skipped too."""
PYTHON_BYTES_LIMIT = 64 << 20
"""Python read for kernel names at most: past it, no kernel is taken from the project on this ground."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TRITON2_SUFFIX = re.compile(r"_\d[0-9a-z]*$")  # Triton 2 named a kernel after its signature: add_0d1d2de


def _files(root: Path) -> Iterator[Path]:
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in SKIPPED_FOLDERS]
        for name in names:
            yield Path(folder, name)


def has_native_source(root: Path) -> bool:
    """Whether the project holds a CUDA, C or C++ source or header of its own."""
    return any(path.suffix in NATIVE_SUFFIXES for path in _files(root))


def _python_identifiers(root: Path) -> set[str] | None:
    """Every identifier in the project's Python files; None where it has none, or past PYTHON_BYTES_LIMIT."""
    identifiers: set[str] = set()
    read = 0
    scripts = [path for path in _files(root) if path.suffix == ".py" and path.is_file()]
    if not scripts:
        return None
    for path in scripts:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        read += len(text)
        if read > PYTHON_BYTES_LIMIT:
            return None
        identifiers.update(_IDENTIFIER.findall(text))
    return identifiers


def compiled_elsewhere(kernels: list[RankedKernel], root: Path) -> list[RankedKernel]:
    """``kernels`` with those the project at ``root`` cannot own marked as library kernels: where the
    project is Python alone (Python files, no CUDA, HIP or C++ source), every kernel whose function name
    none of its Python files holds. Any other project is left to the name prefixes: a kernel made by a
    macro would not be found by its name, and a project of binaries and build files names none."""
    if has_native_source(root):
        return kernels
    identifiers = _python_identifiers(root)
    if identifiers is None:
        return kernels

    def named(kernel: RankedKernel) -> bool:
        name = function_name(kernel.demangled)
        return name in identifiers or _TRITON2_SUFFIX.sub("", name) in identifiers

    return [k if k.library or named(k) else k.model_copy(update={"library": True}) for k in kernels]

"""Which kernels a project owns: those it defines, whatever their names say; and in a project without CUDA
or C++ source, only those its Python files name.

Library kernels are told by their names (`intelliperf.contract.kernel_names.LIBRARY_PREFIXES`), but a
PyTorch program launches kernels from more libraries than any list names (PyTorch's flash attention,
cuDNN's and cuBLAS's generated kernels, a wheel's extension, Inductor's generated Triton kernels). One of
them taken for the project's is profiled and then found without line information, and the diagnosis
stops with advice to rebuild with -lineinfo that a Python user cannot follow. A project with no CUDA or
C++ source compiled none of them: a kernel is its own only where one of its Python files names it (a
Triton kernel's `def`, a CUDA source in a string for `load_inline` or CuPy's `RawKernel`).

The name prefixes err the other way too: HeCBench's gemv defines `gemv_quantized_int4` and
`gemv_quantized_int8`, which the prefix `gemv` (cuBLAS's gemv kernels) took for a library's, so the two
kernels that took two thirds of its GPU time were listed and not diagnosed. A kernel the project's own
sources define (``__global__ ... name(``) is the project's, whatever its name begins with.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from intelliperf.contract import RankedKernel
from intelliperf.contract.kernel_names import function_name

__all__ = [
    "NATIVE_SUFFIXES",
    "SOURCE_BYTES_LIMIT",
    "compiled_elsewhere",
    "defined_kernels",
    "has_native_source",
]

NATIVE_SUFFIXES = frozenset(
    {".cu", ".cuh", ".cuf", ".hip", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl"}
)
SKIPPED_FOLDERS = frozenset({"site-packages", "dist-packages", "node_modules", "__pycache__"})
"""Installed packages (a virtual environment inside the project holds PyTorch's C++ headers) and caches;
folders whose name starts with a dot are skipped too."""
SOURCE_BYTES_LIMIT = 64 << 20
"""Source (CUDA, C++ and Python) read at most: past it the rest is not read for kernel definitions, and no
kernel is taken from a Python project on the ground that its files do not name it."""
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GLOBAL = re.compile(r"\b__global__\b")
_NAME_BEFORE_PARENTHESIS = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:<[^<>(){};]*>\s*)?\(")
_DECLARATION_ATTRIBUTES = frozenset(
    {
        "__launch_bounds__",
        "__attribute__",
        "__declspec",
        "alignas",
        "__maxnreg__",
        "__cluster_dims__",
        "decltype",
    }
)
_HEADER_CHARS = 2000
_TRITON2_SUFFIX = re.compile(r"_\d[0-9a-z]*$")  # Triton 2 named a kernel after its signature: add_0d1d2de


def _files(root: Path) -> Iterator[Path]:
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in SKIPPED_FOLDERS]
        for name in names:
            yield Path(folder, name)


def has_native_source(root: Path) -> bool:
    """Whether the project holds a CUDA, C or C++ source or header of its own."""
    return any(path.suffix in NATIVE_SUFFIXES for path in _files(root))


def _kernel_name(header: str) -> str | None:
    """The kernel a ``__global__`` declaration names: the first name before a parenthesis that is not an
    attribute's (``__launch_bounds__(256)``), up to the declaration's body or end."""
    end = min((i for i in (header.find("{"), header.find(";")) if i >= 0), default=len(header))
    for found in _NAME_BEFORE_PARENTHESIS.finditer(header, 0, end):
        if found.group(1) not in _DECLARATION_ATTRIBUTES:
            return found.group(1)
    return None


def _definitions(text: str) -> Iterator[str]:
    for found in _GLOBAL.finditer(text):
        if (name := _kernel_name(text[found.end() : found.end() + _HEADER_CHARS])) is not None:
            yield name


def _read_project(
    root: Path, suffixes: frozenset[str], *, identifiers: bool
) -> tuple[set[str], set[str] | None]:
    """One reading of the project's files with these ``suffixes``, at most SOURCE_BYTES_LIMIT of them:
    the kernels they define (``__global__ void name(``, in a source file or in a Python string, as far as
    the limit let them be read), and with ``identifiers`` every identifier they hold (None without
    ``identifiers``, where no such file exists, or past the limit)."""
    defined: set[str] = set()
    names: set[str] = set()
    read = files = 0
    for path in _files(root):
        if path.suffix not in suffixes:
            continue
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        files += 1
        read += len(text)
        if read > SOURCE_BYTES_LIMIT:
            return defined, None
        defined.update(_definitions(text))
        if identifiers:
            names.update(_IDENTIFIER.findall(text))
    return defined, names if identifiers and files else None


def defined_kernels(root: Path) -> set[str]:
    """The names of the kernels the project's CUDA, C++ and Python files define (``__global__ void
    name(``, in a source file or in a Python string), reading at most SOURCE_BYTES_LIMIT of them."""
    return _read_project(root, NATIVE_SUFFIXES | {".py"}, identifiers=False)[0]


def compiled_elsewhere(kernels: list[RankedKernel], root: Path) -> list[RankedKernel]:
    """``kernels`` with their owner settled by the project at ``root``: a kernel its sources define is the
    project's, though its name begins like a library's (``defined_kernels``); where the project is Python
    alone (Python files, no CUDA, HIP or C++ source), every kernel whose function name none of its Python
    files holds is a library's. Any other project is left to the name prefixes for the rest: a kernel made
    by a macro would not be found by its name, and a project of binaries and build files names none."""
    native = has_native_source(root)
    if native and not any(k.library for k in kernels):
        return kernels
    suffixes = NATIVE_SUFFIXES | {".py"} if native else frozenset({".py"})
    defined, identifiers = _read_project(root, suffixes, identifiers=not native)
    kernels = [
        k.model_copy(update={"library": False}) if k.library and function_name(k.demangled) in defined else k
        for k in kernels
    ]
    if identifiers is None:
        return kernels

    def named(kernel: RankedKernel) -> bool:
        name = function_name(kernel.demangled)
        return name in identifiers or _TRITON2_SUFFIX.sub("", name) in identifiers

    return [k if k.library or named(k) else k.model_copy(update={"library": True}) for k in kernels]

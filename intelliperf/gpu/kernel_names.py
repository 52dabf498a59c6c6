"""Match the names Nsight Compute prints to the kernels the tracer saw.

The tracer knows each kernel's mangled name and its `__cxa_demangle` form
(`transpose_tiled(float const*, float*, int, int)`). ncu prints either the mangled name or its
own demangling (`transpose_tiled(const float *, float *, int, int)`), whatever
`--print-kernel-base` says (seen on ncu 2025.3: the source page ignores it). Two demanglings
are the same signature when the function names agree and each parameter has the same tokens.
"""

from __future__ import annotations

import re

__all__ = ["LIBRARY_PREFIXES", "canonical_signature", "is_library_kernel", "same_kernel"]

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|::|[^\sA-Za-z0-9_]")


def _split_top_level(text: str, separator: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == separator and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts


def _without_return_type(name: str) -> str:
    """`void foo<int, 3>` -> `foo<int, 3>`: ncu prints a return type for template kernels."""
    depth, cut = 0, 0
    for index, ch in enumerate(name.strip()):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == " " and depth == 0:
            cut = index + 1
    return name.strip()[cut:]


def canonical_signature(demangled: str) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """(function name, per-parameter sorted tokens); a name without parameters has none."""
    text = demangled.strip()
    depth, open_at = 0, -1
    for index, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            open_at = index
            break
    name, params = (text, "") if open_at < 0 else (text[:open_at], text[open_at + 1 : text.rfind(")")])
    name = re.sub(r"\s+", "", _without_return_type(name))
    tokens = tuple(
        tuple(sorted(_TOKEN.findall(param))) for param in _split_top_level(params, ",") if param.strip()
    )
    return name, tokens


def same_kernel(ncu_name: str, mangled: str, demangled: str) -> bool:
    if ncu_name in (mangled, demangled):
        return True
    return canonical_signature(ncu_name) == canonical_signature(demangled)


LIBRARY_PREFIXES = (
    "at::",  # PyTorch ATen
    "c10::",
    "cub::",  # CUB and Thrust, compiled in from the CUDA toolkit's headers
    "thrust::",
    "cutlass::",
    "cublas",
    "cublasLt",
    "cudnn",
    "cufft",
    "curand",
    "cusparse",
    "nccl",
    "flash::",
    "xmma",
    "nvjet",
    "sm80_xmma",
    "sm90_xmma",
    "ampere_",
    "hopper_",
    "volta_",
    "turing_",
    "gemv",
    "gemmk",
    "splitKreduce",
)
"""Name prefixes (after a return type and namespaces like `(anonymous namespace)::`) of kernels that
come from libraries: their source is not in the user's project, so they are listed with their time
but never profiled, diagnosed or selected. cuBLAS and cuDNN kernels have C names (`sm90_xmma_gemm_...`,
`nvjet_...`, `ampere_sgemm_...`); CUB, Thrust, CUTLASS and ATen kernels are C++ names in those namespaces."""


def is_library_kernel(demangled: str) -> bool:
    """Whether a kernel (by its demangled name) belongs to a library rather than to the user's project."""
    name, _ = canonical_signature(demangled)
    return name.removeprefix("(anonymousnamespace)::").startswith(LIBRARY_PREFIXES)

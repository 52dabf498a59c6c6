"""Kernel names as the tracer gives them: a mangled name and its `__cxa_demangle` form. The counter pass
and the cubins' listings name kernels by their mangled names, so matching them needs nothing here; these
are the bare function name, the canonical signature and whether a kernel is a library's."""

from __future__ import annotations

import re

__all__ = ["LIBRARY_PREFIXES", "canonical_signature", "function_name", "is_library_kernel", "normalized"]

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
    """`void foo<int, 3>` -> `foo<int, 3>`: a template kernel's name has its return type."""
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


_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)(-?\d)")
_INT_SUFFIX = re.compile(r"(?<=\d)(?:ul|ull|u|l|ll)\b")
_CXA_LAMBDA = re.compile(r"\{lambda\(([^)]*)\)#(\d+)\}")


def normalized(demangled: str) -> str:
    """One spelling for what demanglers write differently: lambdas, casts in template arguments
    (`<(int)32>`), integer suffixes (`<3u>`)."""
    text = _CXA_LAMBDA.sub(r"lambda(\1)#\2", demangled)
    return _INT_SUFFIX.sub("", _CAST.sub(r"\1", text))


def function_name(demangled: str) -> str:
    """The bare function name: `void geom::tile_sums<32>(float2 const*, float*, int)` -> `tile_sums`."""
    return canonical_signature(normalized(demangled))[0].split("<", 1)[0].rsplit("::", 1)[-1]


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

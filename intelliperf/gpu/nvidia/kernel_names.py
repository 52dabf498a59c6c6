"""Match the names Nsight Compute prints to the kernels the tracer saw.

The tracer knows each kernel's mangled name and its `__cxa_demangle` form. The counter pass exports
every page with `--print-kernel-base mangled`, so a kernel is found by its mangled name, exactly (seen
on ncu 2025.3: the raw and both source pages then print `_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi`).
Recordings made with ncu's own demangling are matched by signature, and that demangling differs from
`__cxa_demangle` in ways seen on ncu 2025.3 (tests/fixtures/gpu/tile_sums/demangled holds the pages):

- parameter spelling: `const float *` for `float const*`;
- template arguments with casts on the source pages: `tile_sums<(int)32>` for `tile_sums<32>`;
- lambdas: `main::[lambda(int) (instance 1)]` for `main::{lambda(int)#1}`, with `T1` for the
  lambda's parameter type;
- the raw page drops a kernel's outer namespace: `detail::normalize` for `geom::detail::normalize`.
"""

from __future__ import annotations

import re

__all__ = ["LIBRARY_PREFIXES", "canonical_signature", "function_name", "is_library_kernel", "same_kernel"]

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


_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool)\)(-?\d)")
_INT_SUFFIX = re.compile(r"(?<=\d)(?:ul|ull|u|l|ll)\b")
_CXA_LAMBDA = re.compile(r"\{lambda\(([^)]*)\)#(\d+)\}")
_NCU_LAMBDA = re.compile(r"\[lambda\(([^)]*)\) \(instance (\d+)\)\]")
_PLACEHOLDER = re.compile(r"^T\d+$")


def _normalized(demangled: str) -> str:
    """One spelling for what ncu's and `__cxa_demangle`'s demanglings write differently."""
    text = _CXA_LAMBDA.sub(r"lambda(\1)#\2", demangled)
    text = _NCU_LAMBDA.sub(r"lambda(\1)#\2", text)
    return _INT_SUFFIX.sub("", _CAST.sub(r"\1", text))


def _same_qualified_name(ncu: str, ours: str) -> bool:
    """Equal, or ncu's name is ours without leading namespaces (the raw page drops the outer one)."""
    return ncu == ours or ours.endswith("::" + ncu)


def same_kernel(ncu_name: str, mangled: str, demangled: str) -> bool:
    if ncu_name in (mangled, demangled):
        return True
    ncu, ours = canonical_signature(_normalized(ncu_name)), canonical_signature(_normalized(demangled))
    if not _same_qualified_name(ncu[0], ours[0]) or len(ncu[1]) != len(ours[1]):
        return False
    return all(
        theirs == mine or any(_PLACEHOLDER.match(token) for token in theirs)
        for theirs, mine in zip(ncu[1], ours[1], strict=True)
    )


def function_name(demangled: str) -> str:
    """The bare function name: `void geom::tile_sums<32>(float2 const*, float*, int)` -> `tile_sums`."""
    return canonical_signature(_normalized(demangled))[0].split("<", 1)[0].rsplit("::", 1)[-1]


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

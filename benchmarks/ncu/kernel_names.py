"""Match the names Nsight Compute prints to the kernels the tracer saw.

The tracer knows each kernel's mangled name and its `__cxa_demangle` form. The ncu counter pass exported
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

from intelliperf.contract.kernel_names import canonical_signature, normalized

__all__ = ["same_kernel"]

_NCU_LAMBDA = re.compile(r"\[lambda\(([^)]*)\) \(instance (\d+)\)\]")
_PLACEHOLDER = re.compile(r"^T\d+$")


def _spelled_as_ours(name: str) -> str:
    """ncu's lambdas written as `__cxa_demangle` writes them, then `normalized`."""
    return normalized(_NCU_LAMBDA.sub(r"{lambda(\1)#\2}", name))


def _same_qualified_name(ncu: str, ours: str) -> bool:
    """Equal, or ncu's name is ours without leading namespaces (the raw page drops the outer one)."""
    return ncu == ours or ours.endswith("::" + ncu)


def same_kernel(ncu_name: str, mangled: str, demangled: str) -> bool:
    if ncu_name in (mangled, demangled):
        return True
    ncu, ours = canonical_signature(_spelled_as_ours(ncu_name)), canonical_signature(normalized(demangled))
    if not _same_qualified_name(ncu[0], ours[0]) or len(ncu[1]) != len(ours[1]):
        return False
    return all(
        theirs == mine or any(_PLACEHOLDER.match(token) for token in theirs)
        for theirs, mine in zip(ncu[1], ours[1], strict=True)
    )

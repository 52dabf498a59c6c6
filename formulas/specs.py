"""GPU facts the formulas reason with, keyed by architecture (as Proton's specs.py keys its tables)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GpuFacts", "facts_for"]


@dataclass(frozen=True)
class GpuFacts:
    warp_size: int
    max_warps_per_sm: int
    shared_memory_banks: int
    bank_width_bytes: int
    sector_bytes: int
    same_address_atomic_ns: float
    """Service time of one same-address global atomic in its L2 slice. Measured on an H200 (sm_90,
    Nov 2026): 16.7M fp32 atomicAdd to one address took 29.5 ms in one L2 slice, 1.76 ns each."""


_FACTS = {
    "sm_90": GpuFacts(
        warp_size=32,
        max_warps_per_sm=64,
        shared_memory_banks=32,
        bank_width_bytes=4,
        sector_bytes=32,
        same_address_atomic_ns=1.76,
    ),
}


def facts_for(arch: str) -> GpuFacts:
    """Facts for `arch`; an unmeasured architecture gets the nearest older measured one."""
    if arch in _FACTS:
        return _FACTS[arch]
    digits = "".join(ch for ch in arch if ch.isdigit())
    older = [key for key in _FACTS if digits and int(key[3:]) <= int(digits)]
    return _FACTS[max(older, key=lambda key: int(key[3:]))] if older else _FACTS["sm_90"]

"""GPU facts, one table per architecture (as Proton's specs.py keys its tables): what the formulas reason
with and what a backend needs to turn a launch's resources into the blocks an SM can hold. On the ground
floor so that the formulas and every backend read the same numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GpuFacts", "UnknownArchitectureError", "facts_for"]


class UnknownArchitectureError(LookupError):
    """No facts measured for this architecture or an older one of its vendor: a formula that needs them says
    it could not decide rather than reason with another chip's numbers."""

    def __init__(self, arch: str) -> None:
        self.arch = arch
        measured = ", ".join(sorted(_FACTS))
        super().__init__(
            f"no GPU facts for {arch!r} (measured: {measured}); the formulas have not been calibrated on it"
        )


@dataclass(frozen=True)
class GpuFacts:
    warp_size: int
    max_warps_per_sm: int
    shared_memory_banks: int
    bank_width_bytes: int
    sector_bytes: int
    same_address_atomic_ns: float | None
    """Service time of one same-address global atomic in its L2 slice. Measured on an H200 (sm_90,
    Nov 2026): 16.7M fp32 atomicAdd to one address took 29.5 ms in one L2 slice, 1.76 ns each. None where
    not measured: the atomics formula then does not decide."""
    max_blocks_per_sm: int | None
    """Resident blocks (workgroups) per SM (CU), whatever their size."""
    registers_per_sm: int | None
    register_allocation_unit: int | None
    """Registers are given to a warp in units of this many (rounded up)."""
    register_partitions: int | None
    """The register file is split among this many sub-partitions; a warp lives in one."""
    min_registers_per_thread: int | None
    shared_bytes_per_sm: int | None
    """The most shared memory (LDS) one SM (CU) can give its resident blocks."""
    shared_bytes_reserved_per_block: int | None
    """Shared memory the system takes per resident block, beside what the kernel declares."""


_FACTS = {
    "sm_90": GpuFacts(
        warp_size=32,
        max_warps_per_sm=64,
        shared_memory_banks=32,
        bank_width_bytes=4,
        sector_bytes=32,
        same_address_atomic_ns=1.76,
        # CUDA C++ Programming Guide, compute capability 9.0 (and CUPTI's device record on the H100 and
        # H200: 65536 registers, 32 blocks, 2048 threads per SM, tests/fixtures/gpu/*/counters-*.jsonl);
        # the register allocation agrees with Nsight Compute's occupancy limit by registers on every
        # recorded kernel (intelliperf.gpu.nvidia.metrics.occupancy_limit_registers).
        max_blocks_per_sm=32,
        registers_per_sm=65536,
        register_allocation_unit=256,
        register_partitions=4,
        min_registers_per_thread=16,
        shared_bytes_per_sm=228 * 1024,
        shared_bytes_reserved_per_block=1024,
    ),
    # AMD CDNA3 (MI300): 64-wide wavefronts, up to 32 waves per CU (8 per SIMD, 4 SIMDs), 32 LDS banks of
    # 4 bytes: AMD's CDNA3 ISA and MI300 documentation, not measured here (no AMD hardware was available).
    "gfx942": GpuFacts(
        warp_size=64,
        max_warps_per_sm=32,
        shared_memory_banks=32,
        bank_width_bytes=4,
        sector_bytes=64,
        same_address_atomic_ns=None,
        # The occupancy facts are not written down for CDNA3 here (no AMD hardware to check them against):
        # the occupancy formula says it could not decide on AMD until they are.
        max_blocks_per_sm=None,
        registers_per_sm=None,
        register_allocation_unit=None,
        register_partitions=None,
        min_registers_per_thread=None,
        shared_bytes_per_sm=None,
        shared_bytes_reserved_per_block=None,
    ),
}


def facts_for(arch: str) -> GpuFacts:
    """Facts for ``arch``: an unmeasured NVIDIA architecture gets the nearest older measured NVIDIA one (its
    successor keeps warp size, banks and sectors); anything else, an older NVIDIA chip or an AMD chip
    without its own entry, raises UnknownArchitectureError."""
    if arch in _FACTS:
        return _FACTS[arch]
    nvidia = re.fullmatch(r"sm_?([0-9]+)a?", arch)
    if nvidia is not None:
        older = [key for key in _FACTS if key.startswith("sm_") and int(key[3:]) <= int(nvidia[1])]
        if older:
            return _FACTS[max(older, key=lambda key: int(key[3:]))]
    raise UnknownArchitectureError(arch)

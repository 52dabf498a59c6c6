"""GPU facts, one table per architecture (as Proton's specs.py keys its tables): what the formulas reason
with and what a backend needs to turn a launch's resources into the blocks an SM can hold. On the ground
floor so that the formulas and every backend read the same numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["GpuFacts", "UnknownArchitectureError", "facts_for"]


class UnknownArchitectureError(LookupError):
    """No facts written down for this architecture or an older one of its vendor: a formula that needs them
    says it could not decide rather than reason with another chip's numbers."""

    def __init__(self, arch: str) -> None:
        self.arch = arch
        known = ", ".join(sorted(_FACTS))
        super().__init__(
            f"no GPU facts for {arch!r} (known: {known}); the formulas have not been calibrated on it"
        )


@dataclass(frozen=True)
class GpuFacts:
    """NVIDIA's terms, each with its AMD counterpart where it differs: SM (CU), warp (wavefront), block
    (workgroup), shared memory (LDS), register sub-partition (SIMD). Registers are counted per thread
    (lane), 32 bits each: an AMD VGPR of a 64-lane wavefront is 64 of them."""

    warp_size: int
    max_warps_per_sm: int
    """Warp (wavefront) slots of one SM (CU), shared evenly by its register partitions (SIMDs)."""
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
    """The SM's (CU's) register file in 32-bit per-lane registers: 65536 on sm_90; 4 SIMDs x 512 VGPRs x
    64 lanes on CDNA2/CDNA3."""
    register_allocation_unit: int | None
    """Registers are given to a warp (wavefront) in units of this many (rounded up), lanes times
    registers: 32 x 8 on sm_90, 64 x 8 VGPRs on CDNA2/CDNA3."""
    register_partitions: int | None
    """The register file is split among this many sub-partitions (SIMDs); a warp (wavefront) lives in one."""
    min_registers_per_thread: int | None
    shared_bytes_per_sm: int | None
    """The most shared memory (LDS) one SM (CU) can give its resident blocks."""
    shared_bytes_reserved_per_block: int | None
    """Shared memory the system takes per resident block, beside what the kernel declares."""


_CDNA = GpuFacts(
    # AMD CDNA2 (gfx90a, MI200) and CDNA3 (gfx942, MI300): the same numbers for every fact below. These are
    # AMD's and LLVM's documentation values, NOT measured here (no AMD hardware was available):
    # - 64-wide wavefronts, 4 SIMDs per CU with 8 wave slots each, 32 per CU: rocprof-compute's
    #   "Pipeline descriptions" (ROCm/rocprofiler-compute docs/conceptual/pipeline-descriptions.rst: "slots
    #   for up to 8 wavefronts (for 32 total wavefront slots on each CU)", "On the CDNA2 MI2XX ... only 8
    #   waveslots per-SIMD"); LLVM AMDGPUBaseInfo.cpp getMaxWavesPerEU (8 on gfx90a and later) and
    #   getEUsPerCU (4).
    # - LDS: 32 banks of 4 bytes (pipeline-descriptions.rst) and 64 KiB per CU (ROCm's "GPU hardware
    #   specifications", https://rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html: LDS 64 KiB for
    #   MI300X/MI300A/MI250X/MI210); no per-workgroup reservation is documented, so none is counted.
    # - vL1D cache line 64 B (rocprof-compute docs/conceptual/vector-l1-cache.rst).
    # - Registers: a 512 KiB VGPR file per CU (gpu-arch-specs: "VGPR File 512 KiB"), i.e. 512 VGPRs per lane
    #   of each SIMD, shared by the architected VGPRs and the AGPRs (pipeline-descriptions.rst, "AGPRs";
    #   LLVM AMDGPUUsage, kernel descriptor GRANULATED_WORKITEM_VGPR_COUNT for GFX90A/GFX942: 0..512,
    #   align(arch_vgprs, 4) + acc_vgprs, in blocks of 8); allocated in granules of 8 VGPRs, at least one.
    # - Workgroups per CU: barriers limit a CU to 16 workgroups of two or more waves (LLVM
    #   getMaxWorkGroupsPerCU; a single-wave workgroup takes no barrier), which 32 wave slots never let
    #   them reach, and rocprof-compute's SPI panel expects no other workgroup limit on CDNA2 and later
    #   ("Reached CU Workgroup Limit ... always zero on CDNA2 or newer", shader-engine.rst): 32, one per slot.
    warp_size=64,
    max_warps_per_sm=32,
    shared_memory_banks=32,
    bank_width_bytes=4,
    sector_bytes=64,
    same_address_atomic_ns=None,
    max_blocks_per_sm=32,
    registers_per_sm=4 * 512 * 64,
    register_allocation_unit=8 * 64,
    register_partitions=4,
    min_registers_per_thread=8,
    shared_bytes_per_sm=64 * 1024,
    shared_bytes_reserved_per_block=0,
)

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
    "gfx90a": _CDNA,
    "gfx942": _CDNA,
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

"""What the formulas measure, in words that do not belong to any vendor's profiler.

A formula asks for `Quantity` values (kernel level), reads `Column` values of single instructions (to
point at source lines) and classifies instructions by `Kind`. Each GPU backend maps these onto its own
profiler once, per architecture, in one table: Nsight Compute metrics, source-page columns and instruction
opcodes in `intelliperf.gpu.nvidia_metrics`, rocprofv3 counters in `intelliperf.gpu.amd_counters`. A
quantity a backend cannot measure on a chip is simply absent from the profile, and a formula that needs
it says it could not decide: it is never read as 0.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Column", "Kind", "Quantity"]


class Quantity(StrEnum):
    """Kernel-level quantities, for the first profiled launch of a kernel."""

    KERNEL_TIME_NS = "kernel_time_ns"
    GRID_SIZE = "grid_size"
    """Blocks (workgroups) in the launch."""
    BLOCK_SIZE = "block_size"
    """Threads (work-items) per block."""

    DRAM_BUSY_PCT = "dram_busy_pct"
    L2_BUSY_PCT = "l2_busy_pct"
    L1_BUSY_PCT = "l1_busy_pct"
    """How busy a memory unit was, in percent of its peak (the busiest of its parts)."""
    SHARED_PIPE_BUSY_PCT = "shared_pipe_busy_pct"
    """How busy the shared-memory (LDS) pipe was, in percent of its peak."""

    SHARED_ACCESS_UNITS = "shared_access_units"
    SHARED_ACCESS_UNITS_IDEAL = "shared_access_units_ideal"
    SHARED_ACCESS_UNITS_EXCESS = "shared_access_units_excess"
    """Shared-memory work: what the kernel's shared accesses took, what they would take without bank
    conflicts, and the difference (NVIDIA: wavefronts; AMD: LDS cycles)."""

    GLOBAL_SECTORS = "global_sectors"
    GLOBAL_SECTORS_IDEAL = "global_sectors_ideal"
    GLOBAL_SECTORS_EXCESS = "global_sectors_excess"
    """Global-memory sectors the kernel's accesses moved, the sectors they need at best, the excess."""
    GLOBAL_LOAD_SECTORS_IDEAL = "global_load_sectors_ideal"
    """The sectors the kernel's global loads need at best (requested bytes / sector size)."""

    L2_SECTORS_READ_BY_L1 = "l2_sectors_read_by_l1"
    DRAM_SECTORS_READ = "dram_sectors_read"
    BYTES_USED_PER_SECTOR_PCT = "bytes_used_per_sector_pct"

    ATOMIC_INSTRUCTIONS_NO_RETURN = "atomic_instructions_no_return"
    """Warp-level global atomics whose old value is not used (reductions)."""
    ATOMIC_INSTRUCTIONS_RETURN = "atomic_instructions_return"
    """Warp-level global atomics that return the old value."""
    L2_ATOMICS_BUSIEST_SLICE = "l2_atomics_busiest_slice"
    L2_ATOMICS_MEAN_SLICE = "l2_atomics_mean_slice"
    """Atomic operations served by the busiest L2 slice (channel) and by the mean one."""

    LOCAL_BYTES_LOADED = "local_bytes_loaded"
    LOCAL_BYTES_STORED = "local_bytes_stored"
    """Local (scratch) memory traffic: spills and register-indexed arrays."""
    GLOBAL_BYTES_LOADED = "global_bytes_loaded"
    GLOBAL_BYTES_STORED = "global_bytes_stored"
    REGISTERS_PER_THREAD = "registers_per_thread"
    BLOCKS_PER_SM_BY_REGISTERS = "blocks_per_sm_by_registers"
    ACHIEVED_OCCUPANCY_PCT = "achieved_occupancy_pct"

    WARP_INSTRUCTIONS = "warp_instructions"
    THREAD_INSTRUCTIONS = "thread_instructions"
    ACTIVE_THREADS_PER_INSTRUCTION = "active_threads_per_instruction"
    ISSUE_BUSY_PCT = "issue_busy_pct"
    """Share of cycles the schedulers issued an instruction, in percent."""


class Column(StrEnum):
    """Per-instruction counters, as a backend attributes them to one machine instruction."""

    EXECUTED = "executed"
    """Warp-level executions of the instruction."""
    THREADS_EXECUTED = "threads_executed"
    SHARED_ACCESS_UNITS = "shared_access_units"
    SHARED_ACCESS_UNITS_IDEAL = "shared_access_units_ideal"
    SHARED_ACCESS_UNITS_EXCESS = "shared_access_units_excess"
    GLOBAL_SECTORS = "global_sectors"
    GLOBAL_SECTORS_IDEAL = "global_sectors_ideal"
    GLOBAL_SECTORS_EXCESS = "global_sectors_excess"


class Kind(StrEnum):
    """What an instruction does, as far as the formulas care."""

    GLOBAL_LOAD = "global_load"
    GLOBAL_STORE = "global_store"
    GLOBAL_ATOMIC = "global_atomic"
    LOCAL_LOAD = "local_load"
    LOCAL_STORE = "local_store"
    SHARED_ACCESS = "shared_access"
    OTHER = "other"

"""The ground floor every backend, formula, judge and engine stands on: what a profile of one kernel holds,
in words that belong to no vendor's profiler.

A formula asks for `Quantity` values (kernel level), reads `Column` values of single instructions (to
point at source lines) and classifies instructions by `Kind`. Each GPU backend maps these onto its own
profiler once, per architecture, in one table: CUPTI metrics, source columns and instruction opcodes in
`intelliperf.gpu.nvidia.metrics`, rocprofv3 counters in `intelliperf.gpu.amd.counters`. A quantity a
backend cannot measure on a chip is simply absent from the profile, and a formula that needs it says it
could not decide: it is never read as 0 (`MissingMetricError`).

A backend hands the engine a `KernelProfile` per kernel (counters, instructions with their assembly, source
rows) and the timing pass's `KernelStats` (per kernel: launches and their durations).
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from intelliperf.contract.report import LAUNCH_DURATIONS_KEPT, SourceLine
from intelliperf.errors import ProfileError

__all__ = [
    "CONTEXT_LINES",
    "Column",
    "Instruction",
    "KernelProfile",
    "KernelStats",
    "Kind",
    "LaunchShape",
    "MissingMetricError",
    "Quantity",
    "SourceRow",
    "kept_launch_durations",
    "shape_hash",
    "stats_of",
]

CONTEXT_LINES = 4  # source lines shown on each side of a hot line


class Quantity(StrEnum):
    """Kernel-level quantities, for the first profiled launch of a kernel."""

    KERNEL_TIME_NS = "kernel_time_ns"
    GRID_SIZE = "grid_size"
    """Blocks (workgroups) in the launch."""
    BLOCK_SIZE = "block_size"
    """Threads (work-items) per block."""
    SM_COUNT = "sm_count"
    """Multiprocessors (compute units) of the device the kernel ran on."""
    SHARED_BYTES_PER_BLOCK = "shared_bytes_per_block"
    """Shared memory (LDS) one block declares, static and dynamic."""

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


class MissingMetricError(ProfileError):
    """A quantity a formula needs is absent, `n/a` or not a number in the profile.

    A profiler reports `n/a` for a counter the architecture does not support (Nsight Compute on sm_90, for
    one of its atomic-instruction counters), and a backend may have no counter for a quantity at all;
    reading either as 0 would turn "not measured" into "none happened". A formula that meets one says it
    could not decide (`Formula.evaluate`).
    """

    def __init__(self, kernel: str, names: Sequence[str]) -> None:
        self.names = tuple(names)
        super().__init__(
            f"{kernel}: the profiler gave no value for {', '.join(self.names)} "
            "(n/a, unsupported or not collected)"
        )


@dataclass(frozen=True)
class Instruction:
    """One machine instruction: its address, its text (shown, never interpreted by a formula), its
    per-instruction counters and what it does, as the backend that profiled it says.

    A profiler's parser fills ``metrics`` with its own column names and leaves ``kind`` OTHER; the backend
    turns that into `Column` keys and a `Kind` before a formula sees it."""

    address: str
    assembly: str
    metrics: Mapping[str, float]
    kind: Kind = Kind.OTHER


@dataclass(frozen=True)
class SourceRow:
    """One source line of one kernel with the per-line counters its profiler attributes to it."""

    file: str
    line: int
    code: str
    metrics: Mapping[str, float]
    instructions: Sequence[Instruction] = ()

    def get(self, column: Column) -> float:
        return self.metrics.get(column, 0.0)


@dataclass(frozen=True)
class KernelProfile:
    """Everything known about one kernel: tracer timings, counters, source-line counters and source."""

    name: str
    demangled: str
    duration_ns: float
    metrics: Mapping[str, float]
    instructions: Sequence[Instruction] = ()
    source: Sequence[SourceRow] = ()
    source_text: Mapping[str, Sequence[str]] = field(default_factory=dict)
    launches: int = 1
    total_ns: float = 0.0
    arch: str = field(kw_only=True)
    """The architecture the kernel was profiled on (sm_90, gfx942): no default, a backend always knows."""
    source_page: bool = True
    """Whether the profiler's source view had an entry for this kernel (with or without lines)."""

    def optional(self, name: Quantity | str) -> float | None:
        """A quantity's value, or None where it is absent, `n/a` or not a number."""
        value = self.metrics.get(name)
        if value is None or math.isnan(float(value)):
            return None
        return float(value)

    def metric(self, name: Quantity | str) -> float:
        """A quantity's value; raises MissingMetricError where it is absent or `n/a` (never 0)."""
        value = self.optional(name)
        if value is None:
            raise MissingMetricError(self.demangled or self.name, [name])
        return value

    def instruction_total(self, column: Column, where: Callable[[Instruction], bool] | None = None) -> float:
        """Sum of a per-instruction counter over the kernel, each instruction counted once.

        Raises MissingMetricError when the kernel has no per-instruction counters at all. A column missing
        from every instruction is 0: profilers leave out a column no instruction of the kernel contributes
        to (no shared-memory column for a kernel without shared accesses, seen in every recorded profile).
        """
        if not self.instructions:
            raise MissingMetricError(self.demangled or self.name, ["per-instruction source counters"])
        return sum(i.metrics.get(column, 0.0) for i in self.instructions if where is None or where(i))

    def code_around(self, file: str, line: int, context: int = CONTEXT_LINES) -> list[SourceLine]:
        lines = self.source_text.get(file)
        if lines is None:
            rows = [r for r in self.source if r.file == file and abs(r.line - line) <= context]
            return [SourceLine(line=r.line, text=r.code, hot=r.line == line) for r in rows]
        first = max(1, line - context)
        last = min(len(lines), line + context)
        return [SourceLine(line=n, text=lines[n - 1], hot=n == line) for n in range(first, last + 1)]


@dataclass(frozen=True)
class KernelStats:
    name: str
    demangled: str
    launches: int
    total_ns: int
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    code_hash: str | None = None
    shape_hash: str | None = None
    launch_ns: tuple[int, ...] = ()
    """Launch durations as the report keeps them (`kept_launch_durations`): the series' per-launch noise."""


def kept_launch_durations(values: Sequence[int]) -> tuple[int, ...]:
    """Every launch's duration where there are at most LAUNCH_DURATIONS_KEPT, else that many taken evenly
    over the run in trace order (the first and the last always), so that a run's warm-up and its end both
    show."""
    count = len(values)
    if count <= LAUNCH_DURATIONS_KEPT:
        return tuple(int(v) for v in values)
    last = LAUNCH_DURATIONS_KEPT - 1
    return tuple(int(values[(i * (count - 1) + last // 2) // last]) for i in range(LAUNCH_DURATIONS_KEPT))


LaunchShape = tuple[int, ...]
"""One launch configuration: grid x, y, z, block x, y, z and shared memory bytes (static + dynamic)."""


def shape_hash(shapes: Iterable[LaunchShape]) -> str:
    """16 hex digits naming the set of launch configurations a kernel ran with (order and repeats do not
    count): with the code hash, what decides that an earlier counter pass still describes the kernel."""
    distinct = sorted({tuple(int(v) for v in shape) for shape in shapes})
    return hashlib.sha256(json.dumps(distinct).encode()).hexdigest()[:16]


def stats_of(
    durations: Mapping[str, Sequence[int]],
    demangled: Mapping[str, str],
    codes: Mapping[str, str] | None = None,
    shapes: Mapping[str, str] | None = None,
    *,
    unrecorded: Mapping[str, int] | None = None,
) -> list[KernelStats]:
    """Per kernel name, its launches' statistics (durations in ns), and its code hash and launch shape hash
    where the timing pass read them, hottest first. Shared by every timing pass (CUPTI's tracer,
    rocprofv3's kernel trace). ``unrecorded``: per name, launches made without a record (a sampled trace);
    they count among the launches and add the mean of the recorded ones each to the total, while the
    mean, median, extremes and kept durations are the recorded launches'."""
    extra = unrecorded or {}
    stats = [
        KernelStats(
            name=name,
            demangled=demangled.get(name, name),
            launches=len(values) + extra.get(name, 0),
            total_ns=sum(values) + round(extra.get(name, 0) * sum(values) / len(values)),
            mean_ns=sum(values) / len(values),
            median_ns=float(statistics.median(values)),
            min_ns=min(values),
            max_ns=max(values),
            code_hash=(codes or {}).get(name),
            shape_hash=(shapes or {}).get(name),
            launch_ns=kept_launch_durations(values),
        )
        for name, values in durations.items()
        if values
    ]
    stats.sort(key=lambda s: (-s.total_ns, s.name))
    return stats

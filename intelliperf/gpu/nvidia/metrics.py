"""The NVIDIA backend's one table: each quantity, column and instruction kind the formulas read
(intelliperf.contract.profile), as NVIDIA's profiling metrics measure it, per architecture. The metrics
are named as Nsight Compute names them; the counter pass collects the same metrics by those names with
CUPTI's range profiler (kernel-level) and SASS metrics (per instruction, SASS_METRICS). The figures below
were measured with Nsight Compute, the counter pass until 2026-11-27 (benchmarks/ncu, now the reference).

Memory units: Nsight Compute's `lts__throughput` and `l1tex__throughput` are each the maximum over many
sub-unit throughputs, and collecting those breakdowns costs replay passes: on an H100 (ncu 2025.3) the
formulas' metrics took 12 passes per kernel with them and 8 without, 15 against 11 with the source
counters, at ~41 ms per pass per kernel. On sm_90 the maximum came, on every one of the 40 example
kernels measured (originals and fixed versions), from two L1 and four L2 sub-units; their maximum gives
the same utilization (within 0.05 points on 39 kernels, 0.35 on the 40th) for one pass more than
without. Architectures not measured read Nsight Compute's breakdown metrics themselves.

Atomics that return the old value: on sm_90 `smsp__inst_executed_op_global_atom.sum` is `n/a`, and
`smsp__inst_executed_op_generic_atom.sum` counts ATOMG as well as a generic-address ATOM (GPU.md), so
the largest one that has a value is taken.

No kernel-level `smsp__sass_*` metric: those are counted by patching the kernel's SASS, and with the
formulas' metrics they opened a replay pass of their own beside the source section's (on an H100, ncu
2025.3: 6 passes per kernel with them, 5 without). What they measured comes from the source section:
`smsp__sass_inst_executed_op_global_atom.sum` equalled the generic-atom counter, and
`smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct` the global loads' ideal sectors over
their sectors (within 0.04 points), on every recorded example kernel (tests/fixtures/gpu).

Memory traffic per kind (register pressure's local and global bytes) comes from the source section too:
the L1 bytes metrics `l1tex__t_bytes_pipe_lsu_mem_{local,global}_op_{ld,st}.sum`, with the L1 and L2 hit
rates that the locality formula only showed beside its decision, cost a replay pass of their own (on an
H100, ncu 2025.3: 4 passes per kernel without them, 5 with; 3.94 s against 4.27 s for tile_sums' 8
kernels, `benchmarks/counter_pass.py --plans`). Local bytes are the local instructions' thread
executions times their access width, global bytes the global instructions' sectors times 32; both equal
the L1 metrics on every recorded example kernel (one local store total 1.6% above: a partly active
warp's store still moves whole sectors).

Per-instruction counters come from CUPTI's SASS metrics (SASS_METRICS), the counters behind the columns
of the source section Nsight Compute's pass used; kernel totals of them are summed here, each
instruction once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from intelliperf.contract.gpu_facts import GpuFacts
from intelliperf.contract.profile import Column, Instruction, Kind, Quantity

__all__ = [
    "LAUNCH_METRICS",
    "SASS_METRICS",
    "access_bytes",
    "cupti_instruction",
    "instruction_kind",
    "kernel_metrics",
    "kernel_quantities",
    "launch_metrics",
    "occupancy_limit_registers",
    "range_profiler_metrics",
    "sass_opcode",
]

_PCT = ".avg.pct_of_peak_sustained_elapsed"
SECTOR_BYTES = 32.0
_WIDTHS = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


@dataclass(frozen=True)
class Metric:
    name: str


@dataclass(frozen=True)
class Total:
    """The sum of metrics that must all have a value."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class Largest:
    """The largest of the metrics that have a value (alternatives that count the same thing)."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class InstructionTotal:
    """A per-instruction column summed over the kernel's instructions (of ``kinds``, or all), times
    ``scale``."""

    column: Column
    kinds: tuple[Kind, ...] = ()
    scale: float = 1.0


@dataclass(frozen=True)
class InstructionBytes:
    """The bytes the threads of the kernel's ``kinds`` instructions accessed: each instruction's thread
    executions times its access width (`access_bytes`)."""

    kinds: tuple[Kind, ...]


@dataclass(frozen=True)
class InstructionPercent:
    """One per-instruction column's kernel total as a percentage of another's, over the instructions of
    ``kinds``; absent where the denominator's total is 0 (nothing to measure is not 0%)."""

    numerator: Column
    denominator: Column
    kinds: tuple[Kind, ...]


Source = Metric | Total | Largest | InstructionTotal | InstructionBytes | InstructionPercent

_BUSY_BREAKDOWN: dict[Quantity, Source] = {
    Quantity.DRAM_BUSY_PCT: Metric("dram__throughput" + _PCT),
    Quantity.L2_BUSY_PCT: Metric("lts__throughput" + _PCT),
    Quantity.L1_BUSY_PCT: Metric("l1tex__throughput" + _PCT),
}

_BUSY_BY_ARCH: dict[str, dict[Quantity, Source]] = {
    "sm_90": {
        **_BUSY_BREAKDOWN,
        Quantity.L2_BUSY_PCT: Largest(
            tuple(
                name + _PCT
                for name in (
                    "lts__ltcfabric2ltc_cycles_active",
                    "lts__xbar2lts_cycles_active",
                    "lts__t_tag_requests",
                    "lts__lts2xbar_cycles_active_realtime",
                )
            )
        ),
        Quantity.L1_BUSY_PCT: Largest(
            tuple(
                name + _PCT
                for name in ("l1tex__m_l1tex2xbar_req_cycles_active", "l1tex__data_pipe_lsu_wavefronts")
            )
        ),
    },
}

_QUANTITIES: dict[Quantity, Source] = {
    Quantity.KERNEL_TIME_NS: Metric("gpu__time_duration.sum"),
    Quantity.GRID_SIZE: Metric("launch__grid_size"),
    Quantity.BLOCK_SIZE: Metric("launch__block_size"),
    Quantity.SHARED_PIPE_BUSY_PCT: Metric(
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"
    ),
    Quantity.SHARED_ACCESS_UNITS: InstructionTotal(Column.SHARED_ACCESS_UNITS),
    Quantity.SHARED_ACCESS_UNITS_IDEAL: InstructionTotal(Column.SHARED_ACCESS_UNITS_IDEAL),
    Quantity.SHARED_ACCESS_UNITS_EXCESS: InstructionTotal(Column.SHARED_ACCESS_UNITS_EXCESS),
    Quantity.GLOBAL_SECTORS: InstructionTotal(Column.GLOBAL_SECTORS),
    Quantity.GLOBAL_SECTORS_IDEAL: InstructionTotal(Column.GLOBAL_SECTORS_IDEAL),
    Quantity.GLOBAL_SECTORS_EXCESS: InstructionTotal(Column.GLOBAL_SECTORS_EXCESS),
    Quantity.GLOBAL_LOAD_SECTORS_IDEAL: InstructionTotal(Column.GLOBAL_SECTORS_IDEAL, (Kind.GLOBAL_LOAD,)),
    Quantity.L2_SECTORS_READ_BY_L1: Metric("lts__t_sectors_srcunit_tex_op_read.sum"),
    Quantity.DRAM_SECTORS_READ: Metric("dram__sectors_read.sum"),
    Quantity.BYTES_USED_PER_SECTOR_PCT: InstructionPercent(
        Column.GLOBAL_SECTORS_IDEAL, Column.GLOBAL_SECTORS, (Kind.GLOBAL_LOAD,)
    ),
    Quantity.ATOMIC_INSTRUCTIONS_NO_RETURN: Metric("smsp__inst_executed_op_global_red.sum"),
    Quantity.ATOMIC_INSTRUCTIONS_RETURN: Largest(
        (
            "smsp__inst_executed_op_global_atom.sum",
            "smsp__inst_executed_op_generic_atom.sum",
        )
    ),
    Quantity.L2_ATOMICS_BUSIEST_SLICE: Total(("lts__t_sectors_op_red.max", "lts__t_sectors_op_atom.max")),
    Quantity.L2_ATOMICS_MEAN_SLICE: Total(("lts__t_sectors_op_red.avg", "lts__t_sectors_op_atom.avg")),
    Quantity.LOCAL_BYTES_LOADED: InstructionBytes((Kind.LOCAL_LOAD,)),
    Quantity.LOCAL_BYTES_STORED: InstructionBytes((Kind.LOCAL_STORE,)),
    Quantity.GLOBAL_BYTES_LOADED: InstructionTotal(Column.GLOBAL_SECTORS, (Kind.GLOBAL_LOAD,), SECTOR_BYTES),
    Quantity.GLOBAL_BYTES_STORED: InstructionTotal(Column.GLOBAL_SECTORS, (Kind.GLOBAL_STORE,), SECTOR_BYTES),
    Quantity.REGISTERS_PER_THREAD: Metric("launch__registers_per_thread"),
    Quantity.BLOCKS_PER_SM_BY_REGISTERS: Metric("launch__occupancy_limit_registers"),
    Quantity.SM_COUNT: Metric("launch__sm_count"),
    Quantity.SHARED_BYTES_PER_BLOCK: Total(
        ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic")
    ),
    Quantity.ACHIEVED_OCCUPANCY_PCT: Metric("sm__warps_active.avg.pct_of_peak_sustained_active"),
    Quantity.WARP_INSTRUCTIONS: InstructionTotal(Column.EXECUTED),
    Quantity.THREAD_INSTRUCTIONS: InstructionTotal(Column.THREADS_EXECUTED),
    Quantity.ACTIVE_THREADS_PER_INSTRUCTION: Metric("smsp__thread_inst_executed_per_inst_executed.ratio"),
    Quantity.ISSUE_BUSY_PCT: Metric("smsp__issue_active.avg.pct_of_peak_sustained_active"),
}

SASS_METRICS: dict[str, Column] = {
    "smsp__sass_inst_executed": Column.EXECUTED,
    "smsp__sass_thread_inst_executed": Column.THREADS_EXECUTED,
    "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared": Column.SHARED_ACCESS_UNITS,
    "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal": Column.SHARED_ACCESS_UNITS_IDEAL,
    "smsp__sass_sectors_mem_global": Column.GLOBAL_SECTORS,
    "smsp__sass_sectors_mem_global_ideal": Column.GLOBAL_SECTORS_IDEAL,
}
"""CUPTI's SASS metric -> per-instruction column: the counters behind the source section's columns (on an
H200, CUPTI 13.0, every kernel total equals Nsight Compute's column on all 15 CUDA examples)."""

_EXCESS: dict[Column, tuple[Column, Column]] = {
    Column.SHARED_ACCESS_UNITS_EXCESS: (Column.SHARED_ACCESS_UNITS, Column.SHARED_ACCESS_UNITS_IDEAL),
    Column.GLOBAL_SECTORS_EXCESS: (Column.GLOBAL_SECTORS, Column.GLOBAL_SECTORS_IDEAL),
}
"""What an excess column is, as the source section derives it: the units minus the ideal units."""

LAUNCH_METRICS = (
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "launch__occupancy_limit_registers",
    "launch__sm_count",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
)
"""Nsight Compute's launch statistics that the table reads; the CUPTI counter pass computes them from the
launch, the function's attributes and the device (launch_metrics)."""


def occupancy_limit_registers(registers: int, block_threads: int, *, facts: GpuFacts | None) -> int | None:
    """How many blocks fit on an SM by registers (Nsight Compute's launch__occupancy_limit_registers): each
    warp takes its registers in allocation units from one sub-partition's share of the register file.
    Equal to Nsight Compute's value on every recorded kernel (tests/fixtures/gpu). None where the register
    count or the architecture's register facts are not known."""
    if facts is None:
        return None
    unit, partitions = facts.register_allocation_unit, facts.register_partitions
    per_sm, max_blocks = facts.registers_per_sm, facts.max_blocks_per_sm
    if registers <= 0 or block_threads <= 0 or None in (unit, partitions, per_sm, max_blocks):
        return None
    assert unit and partitions and per_sm and max_blocks
    per_warp = -(-registers * facts.warp_size // unit) * unit
    warps_per_block = -(-block_threads // facts.warp_size)
    warps_per_sm = (per_sm // partitions // per_warp) * partitions
    return min(max_blocks, warps_per_sm // warps_per_block)


def launch_metrics(
    grid: Sequence[int],
    block: Sequence[int],
    registers: int,
    *,
    facts: GpuFacts | None,
    sm_count: int = -1,
    static_shared: int = -1,
    dynamic_shared: int = -1,
) -> dict[str, float]:
    """LAUNCH_METRICS of one launch, from its dimensions, the function's compiled register count (the
    driver allocates at least the architecture's minimum) and shared memory, and the device's SM count; a
    value that cannot be known (a function attribute the driver did not give, -1) is left out, never 0."""
    grid_size = grid[0] * grid[1] * grid[2]
    block_size = block[0] * block[1] * block[2]
    metrics = {"launch__grid_size": float(grid_size), "launch__block_size": float(block_size)}
    least = (facts.min_registers_per_thread or 0) if facts is not None else 0
    allocated = max(registers, least) if registers > 0 else registers
    if allocated > 0:
        metrics["launch__registers_per_thread"] = float(allocated)
    limit = occupancy_limit_registers(allocated, block_size, facts=facts)
    if limit is not None:
        metrics["launch__occupancy_limit_registers"] = float(limit)
    if sm_count > 0:
        metrics["launch__sm_count"] = float(sm_count)
    if static_shared >= 0:
        metrics["launch__shared_mem_per_block_static"] = float(static_shared)
    if dynamic_shared >= 0:
        metrics["launch__shared_mem_per_block_dynamic"] = float(dynamic_shared)
    return metrics


def cupti_instruction(address: str, sass: str, counts: Mapping[str, float]) -> Instruction:
    """One instruction as the CUPTI counter pass counted it (SASS metric -> count), in the formulas' terms."""
    metrics = {SASS_METRICS[name]: value for name, value in counts.items() if name in SASS_METRICS}
    for excess, (units, ideal) in _EXCESS.items():
        if units in metrics and ideal in metrics:
            metrics[excess] = metrics[units] - metrics[ideal]
    return Instruction(address=address, assembly=sass, metrics=metrics, kind=instruction_kind(sass))


def _source(quantity: Quantity, arch: str) -> Source:
    if quantity in _BUSY_BREAKDOWN:
        return _BUSY_BY_ARCH.get(arch, _BUSY_BREAKDOWN)[quantity]
    try:
        return _QUANTITIES[quantity]
    except KeyError:
        raise ValueError(f"the NVIDIA backend has no Nsight Compute metric for {quantity!r}") from None


def kernel_metrics(quantities: Sequence[Quantity], arch: str) -> list[str]:
    """The kernel-level metrics that measure ``quantities`` on ``arch`` (per-instruction totals come from
    the SASS metrics, which the counter pass always collects)."""
    names: dict[str, None] = {}
    for quantity in quantities:
        source = _source(quantity, arch)
        if isinstance(source, Metric):
            names[source.name] = None
        elif isinstance(source, Total | Largest):
            names.update(dict.fromkeys(source.names))
    return list(names)


def range_profiler_metrics(quantities: Sequence[Quantity], arch: str) -> list[str]:
    """The kernel-level metrics that CUPTI's range profiler collects for ``quantities``: the table's metrics
    but the launch statistics (launch_metrics)."""
    return [name for name in kernel_metrics(quantities, arch) if name not in LAUNCH_METRICS]


def kernel_quantities(
    metrics: Mapping[str, float], instructions: Sequence[Instruction], arch: str
) -> dict[str, float]:
    """Every quantity the table can give from one kernel's raw metrics and its (semantic) instructions;
    a quantity whose metrics have no value, or that needs instructions the kernel has none of, is left
    out."""
    found: dict[str, float] = {}
    for quantity in Quantity:
        value = _value(_source(quantity, arch), metrics, instructions)
        if value is not None:
            found[quantity.value] = value
    return found


def _value(source: Source, metrics: Mapping[str, float], instructions: Sequence[Instruction]) -> float | None:
    if isinstance(source, Metric):
        return _number(metrics, source.name)
    if isinstance(source, Total):
        values = [_number(metrics, name) for name in source.names]
        return None if any(v is None for v in values) else sum(v for v in values if v is not None)
    if isinstance(source, Largest):
        present = [v for name in source.names if (v := _number(metrics, name)) is not None]
        return max(present) if present else None
    if not instructions:
        return None
    if isinstance(source, InstructionPercent):
        denominator = _instruction_total(instructions, source.denominator, source.kinds)
        if denominator <= 0:
            return None
        return 100.0 * _instruction_total(instructions, source.numerator, source.kinds) / denominator
    if isinstance(source, InstructionBytes):
        return sum(
            i.metrics.get(Column.THREADS_EXECUTED, 0.0) * access_bytes(i.assembly)
            for i in instructions
            if i.kind in source.kinds
        )
    return source.scale * _instruction_total(instructions, source.column, source.kinds)


def _instruction_total(instructions: Sequence[Instruction], column: Column, kinds: tuple[Kind, ...]) -> float:
    return sum(i.metrics.get(column, 0.0) for i in instructions if not kinds or i.kind in kinds)


def access_bytes(sass: str) -> int:
    """The bytes one thread of a load or store accesses, from its opcode's width modifier (`LDL.64`,
    `STL.U8`, `LDG.E.128.CONSTANT`); 4 where it names none."""
    modifiers = sass_opcode(sass).split(".")[1:]
    return next((_WIDTHS[m] for m in modifiers if m in _WIDTHS), 4)


def _number(metrics: Mapping[str, float], name: str) -> float | None:
    value = metrics.get(name)
    if value is None or value != value:  # absent or NaN (`n/a`)
        return None
    return float(value)


def sass_opcode(sass: str) -> str:
    """The opcode of a SASS instruction's text, past any predicate guard (`@P0 REDG.E.ADD ...`)."""
    text = sass.split(None, 1)
    if text and text[0].startswith("@"):
        text = text[1].split(None, 1) if len(text) > 1 else []
    return text[0] if text else ""


def instruction_kind(sass: str) -> Kind:
    """What a SASS instruction does, as far as the formulas care."""
    opcode = sass_opcode(sass)
    if opcode.startswith(("ATOMS", "LDS", "STS")):
        return Kind.SHARED_ACCESS
    if opcode.startswith(("ATOMG", "ATOM", "RED")) and not opcode.startswith("REDUX"):
        return Kind.GLOBAL_ATOMIC
    if opcode.startswith("LDG"):
        return Kind.GLOBAL_LOAD
    if opcode.startswith("STG"):
        return Kind.GLOBAL_STORE
    if opcode.startswith("LDL"):
        return Kind.LOCAL_LOAD
    if opcode.startswith("STL"):
        return Kind.LOCAL_STORE
    return Kind.OTHER

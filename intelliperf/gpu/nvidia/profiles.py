"""Turn what the counter pass measured into one KernelProfile per kernel, in the formulas' terms
(intelliperf.contract.profile, through the NVIDIA table in intelliperf.gpu.nvidia.metrics): the CUPTI
counter pass's records with the disassembly of the kernels' cubins (`profiles_from_counters`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from intelliperf.contract import DeviceInfo, RankedKernel
from intelliperf.contract.gpu_facts import GpuFacts, UnknownArchitectureError, facts_for
from intelliperf.contract.profile import Instruction, KernelProfile, Quantity, SourceRow
from intelliperf.gpu.nvidia.cupti_counters import CounterRecords, KernelCounters
from intelliperf.gpu.nvidia.metrics import cupti_instruction, kernel_quantities, launch_metrics
from intelliperf.gpu.nvidia.sass_listing import ListedInstruction

__all__ = [
    "Listings",
    "counted_metrics",
    "device_from_counters",
    "kernel_profile",
    "profiles_from_counters",
    "read_sources",
    "rehomed",
    "sum_metrics",
]

Listings = Mapping[int, Mapping[str, Sequence[ListedInstruction]]]
"""Cubin (its CRC, as CUPTI names it) -> function (mangled name) -> its disassembled instructions."""


def read_sources(rows: Sequence[SourceRow], resolve: Path | None) -> dict[str, list[str]]:
    """Source text of every file the rows name, found as recorded or, failing that, under `resolve`.

    A profile recorded elsewhere names files by the paths they had there; the longest path suffix
    that exists under `resolve` (the project directory) is taken to be the same file.
    """
    texts: dict[str, list[str]] = {}
    for file in dict.fromkeys(r.file for r in rows):
        path = _locate(file, resolve)
        if path is not None:
            texts[file] = path.read_text(errors="replace").splitlines()
    return texts


def _locate(file: str, resolve: Path | None) -> Path | None:
    recorded = Path(file)
    if resolve is None:
        return recorded if recorded.is_file() else None
    parts = recorded.parts
    for start in range(1, len(parts)):
        candidate = resolve.joinpath(*parts[start:])
        if candidate.is_file():
            return candidate
    return recorded if recorded.is_file() else None


def rehomed(rows: Sequence[SourceRow], resolve: Path | None) -> list[SourceRow]:
    """Rows whose file was found under ``resolve`` renamed to that path, so locations name the project's
    file rather than the path it had on the machine that recorded the profile."""
    if resolve is None:
        return list(rows)
    found = {file: _locate(file, resolve) for file in dict.fromkeys(r.file for r in rows)}
    resolved = resolve.resolve()
    return [
        replace(r, file=str(path))
        if (path := found[r.file]) is not None and path.resolve().is_relative_to(resolved)
        else r
        for r in rows
    ]


def profiles_from_counters(
    records: CounterRecords,
    listings: Listings,
    kernels: Sequence[RankedKernel],
    *,
    arch: str,
    resolve: Path | None = None,
) -> dict[str, KernelProfile]:
    """A profile for each ranked kernel that the CUPTI counter pass counted (kernel-level metrics, SASS
    counts or both), keyed and matched by mangled name: the counters and the cubins name kernels as the
    tracer does, so templated, namespaced and lambda kernels need no matching."""
    profiles = {}
    for kernel in kernels:
        counted = records.kernels.get(kernel.name)
        if counted is None or (not counted.metrics and counted.sass is None):
            continue
        listing = listings.get(counted.sass.cubin, {}).get(kernel.name) if counted.sass is not None else None
        instructions = _counted_instructions(counted, listing)
        profiles[kernel.name] = kernel_profile(
            kernel,
            counted_metrics(counted, records.device),
            instructions,
            rehomed(_source_rows(instructions, listing, resolve), resolve),
            arch=arch,
            resolve=resolve,
            source_page=listing is not None or counted.sass is None,
        )
    return profiles


def kernel_profile(
    kernel: RankedKernel,
    metrics: Mapping[str, float],
    instructions: tuple[Instruction, ...],
    rows: list[SourceRow],
    *,
    arch: str,
    resolve: Path | None,
    source_page: bool,
) -> KernelProfile:
    """One kernel's profile: its metrics (profiler names) and instructions in the formulas' quantities."""
    quantities = kernel_quantities(metrics, instructions, arch)
    return KernelProfile(
        name=kernel.name,
        demangled=kernel.demangled,
        duration_ns=quantities.get(Quantity.KERNEL_TIME_NS, kernel.median_ns),
        metrics=quantities,
        instructions=instructions,
        source=rows,
        source_text=read_sources(rows, resolve),
        launches=kernel.launches,
        total_ns=kernel.total_ns,
        arch=arch,
        source_page=source_page,
    )


def counted_metrics(counted: KernelCounters, device: Mapping[str, int]) -> dict[str, float]:
    """A kernel's kernel-level values under Nsight Compute's metric names: what the range profiler measured
    and the launch statistics of its first launch (the table reads both). The device's own register file
    and block limit (its record) stand in for the architecture table's where it gave them."""
    if counted.launch is None:
        return dict(counted.metrics)
    launch = counted.launch
    return {
        **counted.metrics,
        **launch_metrics(
            launch.grid,
            launch.block,
            launch.registers,
            facts=device_facts(device),
            sm_count=device.get("sm_count", -1),
            static_shared=launch.static_shared,
            dynamic_shared=launch.dynamic_shared,
        ),
    }


def device_facts(device: Mapping[str, int]) -> GpuFacts | None:
    """The architecture's facts (compute capability in the device record), with the register file, block
    and warp limits the device itself reported; None for an architecture the table does not know."""
    major, minor = device.get("compute_major", 9), device.get("compute_minor", 0)
    try:
        facts = facts_for(f"sm_{major}{minor}")
    except UnknownArchitectureError:
        return None
    measured = {
        "registers_per_sm": device.get("registers_per_sm", -1),
        "max_blocks_per_sm": device.get("max_blocks_per_sm", -1),
        "warp_size": device.get("warp_size", -1),
    }
    return replace(facts, **{name: value for name, value in measured.items() if value > 0})


def _counted_instructions(
    counted: KernelCounters, listing: Sequence[ListedInstruction] | None
) -> tuple[Instruction, ...]:
    """The kernel's counted instructions in address order, with their text where the listing has them."""
    if counted.sass is None:
        return ()
    text = {i.offset: i.sass for i in listing or ()}
    return tuple(
        cupti_instruction(f"0x{pc:05x}", text.get(pc, ""), counted.sass.at(index))
        for index, pc in enumerate(counted.sass.pcs)
    )


def _source_rows(
    instructions: Sequence[Instruction], listing: Sequence[ListedInstruction] | None, resolve: Path | None
) -> list[SourceRow]:
    """The counted instructions grouped by the source line the listing attributes each to, in file and line
    order, each line with its text where the file is found."""
    where = {f"0x{i.offset:05x}": (i.file, i.line) for i in listing or () if i.file is not None and i.line}
    by_line: dict[tuple[str, int], list[Instruction]] = {}
    for instruction in instructions:
        place = where.get(instruction.address)
        if place is not None:
            by_line.setdefault(place, []).append(instruction)  # type: ignore[arg-type]
    texts: dict[str, list[str] | None] = {}
    rows = []
    for (file, line), attributed in sorted(by_line.items()):
        if file not in texts:
            path = _locate(file, resolve)
            texts[file] = path.read_text(errors="replace").splitlines() if path is not None else None
        lines = texts[file]
        code = lines[line - 1].strip() if lines is not None and 0 < line <= len(lines) else ""
        rows.append(
            SourceRow(
                file=file,
                line=line,
                code=code,
                metrics=sum_metrics(i.metrics for i in attributed),
                instructions=tuple(attributed),
            )
        )
    return rows


def device_from_counters(records: CounterRecords, fallback: DeviceInfo) -> DeviceInfo:
    """The device facts the counter pass read from the driver (SM count, L2 size) added to what the device
    probe said."""
    sm_count, l2 = records.device.get("sm_count", 0), records.device.get("l2_bytes", 0)
    return fallback.model_copy(
        update={
            "sm_count": sm_count if sm_count > 0 else fallback.sm_count,
            "l2_bytes": l2 if l2 > 0 else fallback.l2_bytes,
        }
    )


def sum_metrics(all_metrics: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Each metric's total over the given instructions' metrics."""
    total: dict[str, float] = {}
    for metrics in all_metrics:
        for name, value in metrics.items():
            total[name] = total.get(name, 0.0) + value
    return total

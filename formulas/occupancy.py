"""Occupancy: too few warps in flight to hide the latency of what the kernel waits on.

An SM hides a load's latency by issuing from other warps. How many warps it can hold is limited by the
launch and the kernel's resources: the grid (a grid smaller than one wave of the GPU leaves SMs with few
or no blocks), the block size (at most `max_blocks_per_sm` blocks, so tiny blocks waste warp slots), the
registers per thread and the shared memory per block. When the warps that can be resident are few, the
schedulers idle while the memory units are far from busy: the kernel is latency-bound, and more warps in
flight (or more independent work per warp) would make it faster until some unit saturates.

Decision: the occupancy the launch can reach (the warps its resources allow per SM, and no more than
its grid can fill) is below `MAX_OCCUPANCY`, the achieved occupancy too, and the estimated saving is at
least `MIN_SAVING`. The estimate assumes throughput grows with the warps in flight up to
`TARGET_OCCUPANCY` (or the resources' limit when only the grid holds the kernel back), and stops where
the busiest of the issue slots and the memory units would reach `UNIT_PEAK`:
speedup = min(target / achieved, UNIT_PEAK / busiest), saving = 1 - 1 / speedup.

A low achieved occupancy with a reachable one above the threshold (a grid of many short blocks, an
imbalanced tail) is not called a bottleneck: what holds such a kernel back is not the warps it may have.
The achieved occupancy and the issue slots are averages over the SMs that had work, so for a grid smaller
than the GPU's SM count they are scaled by the share of SMs it reaches (`sm_spread`) before the estimate:
a fix that fills every SM gains from the idle ones too.

Against measured fixes (H200, 2026-11-28, the four occupancy examples): 88%, 68%, 85% and 91% estimated,
92%, 76%, 96% and 93% measured (spill_occupancy's fix also ends its spills). The thresholds themselves are
first settings: the examples sit far from them (2-12% achieved, 68-91% estimated savings).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from formulas.base import Formula
from formulas.throughput import UNITS, measured_units
from intelliperf.contract import Diagnosis, SourceLocation
from intelliperf.contract.gpu_facts import GpuFacts, UnknownArchitectureError, facts_for
from intelliperf.contract.kernel_names import function_name
from intelliperf.contract.profile import KernelProfile, Quantity

GRID = Quantity.GRID_SIZE
BLOCK = Quantity.BLOCK_SIZE
SMS = Quantity.SM_COUNT
SHARED = Quantity.SHARED_BYTES_PER_BLOCK
BLOCKS_BY_REGISTERS = Quantity.BLOCKS_PER_SM_BY_REGISTERS
ACHIEVED = Quantity.ACHIEVED_OCCUPANCY_PCT
ISSUE = Quantity.ISSUE_BUSY_PCT

MAX_OCCUPANCY = 0.25
"""Below this share of an SM's warp slots, reachable and achieved, the kernel may be held back by them."""
TARGET_OCCUPANCY = 0.5
"""The occupancy a fix is assumed to reach (more rarely pays once loads are in flight from half the slots)."""
UNIT_PEAK = 0.85
"""The utilization at which the busiest unit (issue slots or memory) stops more warps from helping."""
MIN_SAVING = 0.10


@dataclass(frozen=True)
class Residency:
    """What one launch can keep resident on an SM, and what holds it there."""

    warps_per_block: int
    blocks_per_sm: int
    limiter: str
    theoretical: float
    """Warps the resources allow per SM, over the SM's warp slots."""
    reachable: float
    """No more than the grid can fill: the blocks spread over every SM."""
    waves: float


def residency(kernel: KernelProfile, facts: GpuFacts) -> Residency:
    """The launch's resident blocks per SM by each limit (Nsight Compute's occupancy limits), the
    occupancy they allow and the part of it the grid can fill. Raises MissingMetricError where a launch
    statistic has no value, UnknownArchitectureError where the architecture's facts are not written down."""
    grid, block, sms = kernel.metric(GRID), kernel.metric(BLOCK), kernel.metric(SMS)
    by_registers = kernel.metric(BLOCKS_BY_REGISTERS)
    shared = kernel.metric(SHARED)
    max_blocks, per_sm = facts.max_blocks_per_sm, facts.shared_bytes_per_sm
    reserved = facts.shared_bytes_reserved_per_block
    if max_blocks is None or per_sm is None or reserved is None:
        raise UnknownArchitectureError(kernel.arch)
    warps_per_block = max(1, -(-int(block) // facts.warp_size))
    limits = {
        "registers": int(by_registers),
        "shared memory": per_sm // (int(shared) + reserved) if shared > 0 else max_blocks,
        "warps per SM": facts.max_warps_per_sm // warps_per_block,
        "blocks per SM": max_blocks,
    }
    limiter = min(limits, key=limits.__getitem__)
    blocks_per_sm = max(0, limits[limiter])
    slots = facts.max_warps_per_sm
    theoretical = blocks_per_sm * warps_per_block / slots
    filled = grid * warps_per_block / (sms * slots) if sms > 0 else 0.0
    waves = grid / (blocks_per_sm * sms) if blocks_per_sm and sms > 0 else 0.0
    if filled < theoretical:
        limiter = "grid"
    return Residency(
        warps_per_block=warps_per_block,
        blocks_per_sm=blocks_per_sm,
        limiter=limiter,
        theoretical=theoretical,
        reachable=min(theoretical, filled),
        waves=waves,
    )


PER_SM_UNITS = frozenset({"L1 cache"})
"""Units measured per SM over its active cycles (like the issue slots and the achieved occupancy): SMs the
grid never reaches do not count in them. DRAM and L2 are measured over the whole GPU."""


def sm_spread(kernel: KernelProfile) -> float:
    """The share of the GPU's SMs the grid reaches (1 for a grid of at least one block per SM). The issue
    slots, L1 and the achieved occupancy are averages over the SMs that had work, so a grid smaller than the
    GPU scales them by this share to compare with what a fix that fills every SM could reach: 64 blocks on
    132 SMs at 12.5% achieved are 6% of the GPU's warp slots."""
    grid, sms = kernel.metric(GRID), kernel.metric(SMS)
    return min(1.0, grid / sms) if sms > 0 else 1.0


def _spread_words(spread: float, kernel: KernelProfile) -> str:
    if spread >= 1.0:
        return ""
    grid, sms = kernel.metric(GRID), kernel.metric(SMS)
    return f", on the {grid:.0f} of {sms:.0f} SMs the grid reaches ({spread:.0%} of the GPU)"


class Occupancy(Formula):
    name = "occupancy"
    title = "Low occupancy"
    metric_label = "idle warp slots (% of an SM's warp slots without a resident warp)"
    metrics: ClassVar[tuple[Quantity, ...]] = (GRID, BLOCK, SMS, SHARED, BLOCKS_BY_REGISTERS, ACHIEVED, ISSUE)
    units = UNITS

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        return 100.0 - kernel.metric(ACHIEVED)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        facts = facts_for(kernel.arch)
        shape = residency(kernel, facts)
        achieved = kernel.metric(ACHIEVED) / 100.0
        issue = kernel.metric(ISSUE) / 100.0
        spread = sm_spread(kernel)
        units = measured_units(kernel, UNITS)
        per_gpu = {unit: busy * (spread if unit in PER_SM_UNITS else 1.0) for unit, busy in units.items()}
        unit = max(per_gpu, key=per_gpu.__getitem__)
        busy = per_gpu[unit]
        busiest, busiest_name = (issue * spread, "issue slots") if issue * spread >= busy else (busy, unit)
        target = (
            TARGET_OCCUPANCY
            if shape.theoretical < MAX_OCCUPANCY
            else min(shape.theoretical, TARGET_OCCUPANCY)
        )
        speedup = min(target / max(achieved * spread, 1e-3), UNIT_PEAK / max(busiest, 1e-3))
        saving = max(0.0, min(1.0, 1.0 - 1.0 / speedup)) if speedup > 1 else 0.0
        numbers = {
            "achieved_occupancy": round(achieved, 4),
            "theoretical_occupancy": round(shape.theoretical, 4),
            "reachable_occupancy": round(shape.reachable, 4),
            "blocks_per_sm": float(shape.blocks_per_sm),
            "warps_per_block": float(shape.warps_per_block),
            "waves": round(shape.waves, 3),
            "issue_busy": round(issue, 4),
            "sm_spread": round(spread, 4),
            "memory_busy": round(busy, 4),
        }
        reasoning = (
            f"the launch can keep {shape.reachable:.1%} of an SM's warp slots busy (limited by the "
            f"{shape.limiter}: {shape.blocks_per_sm} blocks of {shape.warps_per_block} warps per SM allowed, "
            f"{shape.waves:.2f} waves over {kernel.metric(SMS):.0f} SMs) and achieved {achieved:.1%} "
            f"(threshold {MAX_OCCUPANCY:.0%}){_spread_words(spread, kernel)}; the busiest of issue "
            f"({issue * spread:.0%}) and the {unit} ({busy:.0%}) is the {busiest_name} at {busiest:.0%}, so "
            f"more warps in flight (up to "
            f"{target:.0%}) could save ~{saving:.0%} of the kernel's time (threshold {MIN_SAVING:.0%})"
        )
        if shape.reachable >= MAX_OCCUPANCY or achieved >= MAX_OCCUPANCY or saving < MIN_SAVING:
            return self.absent(kernel, reasoning, numbers)
        return self.present(
            kernel,
            saving,
            summary=(
                f"{achieved:.0%} achieved occupancy: the {_limit_words(shape)} leaves the schedulers few "
                f"warps to hide latency with while the busiest unit is {busiest:.0%} busy"
            ),
            reasoning=reasoning,
            metrics=numbers,
            locations=resource_lines(kernel, shape),
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "The kernel has too few warps in flight to hide memory and instruction latency, and no unit "
            "is close to saturated. Typical fixes: launch more blocks (at least a few waves of the GPU's "
            "SMs; a grid-stride loop keeps the work per thread the same); give each block more threads, "
            "or each Triton program more warps (num_warps) and smaller tiles so more programs run; cut "
            "per-thread state (fewer live values, __launch_bounds__ with a higher minimum of blocks, "
            "less shared memory per block); give each thread independent loads to overlap (unroll over "
            "independent elements). Keep the result identical. "
            f"{diagnosis.summary}. Evidence: {diagnosis.reasoning}."
        )


def _limit_words(shape: Residency) -> str:
    if shape.limiter == "grid":
        return f"grid ({shape.waves:.2f} waves of the GPU)"
    return f"{shape.limiter} limit ({shape.blocks_per_sm} blocks of {shape.warps_per_block} warps per SM)"


def resource_lines(kernel: KernelProfile, shape: Residency) -> list[SourceLocation]:
    """Where the launch shape and the kernel's resources are written: the kernel's declaration (with its
    __launch_bounds__ or @triton.jit) and each launch of it with its grid and block (`<<<...>>>`, or a
    Triton `kernel[grid](...)` with num_warps), in the files that hold the kernel's profiled lines. Comments
    are not code: a usage line that names the kernel (`// Usage: walk_pages [iterations]`) is neither."""
    name = re.escape(function_name(kernel.demangled or kernel.name))
    declaration = re.compile(rf"(__global__[^;{{]*\b{name}\s*\(|\bdef\s+{name}\s*\()")
    launch = re.compile(rf"\b{name}\s*(<<<|\[[^\]]*\]\s*\()")
    found: list[tuple[str, int, str]] = []
    for file, lines in kernel.source_text.items():
        comment = "#" if file.endswith(".py") else "//"
        for number, line in enumerate(lines, start=1):
            text = line.split(comment, 1)[0]
            if declaration.search(text):
                found.append((file, number, "declaration"))
            elif launch.search(text):
                found.append((file, number, "launch"))
    if not found:
        return []
    share = round(1.0 / len(found), 4)
    numbers = {
        "blocks per SM": float(shape.blocks_per_sm),
        "warps per block": float(shape.warps_per_block),
        "waves": round(shape.waves, 3),
    }
    return [
        SourceLocation(
            file=file, line=line, share=share, metrics=numbers, code=kernel.code_around(file, line)
        )
        for file, line, _ in found[:4]
    ]

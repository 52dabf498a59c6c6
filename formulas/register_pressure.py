"""Register pressure: values that do not fit in the registers a thread may use live in local memory.

A thread gets at most 255 registers, fewer when `__launch_bounds__`/`-maxrregcount` ask for more
resident blocks. What does not fit spills to local memory (per-thread memory cached in L1
and L2; AMD: scratch), and arrays indexed with values the compiler cannot resolve live there too. Both
show as local-memory traffic.

Decision: the local share of the kernel's L1 data traffic (local over local + global bytes) times
the busiest memory unit's utilization is the time removing it could save. Present when the share
is at least 25% and the saving at least 10%. Measured on an H100 (see examples/register_spill and
benchmarks/results/diagnose.json): a kernel capped at 32 registers by `__launch_bounds__(256, 8)`
with 40 live floats moves almost all of its L1 traffic as local memory; every other example moves
none.

Registers also bound occupancy (65536 per SM): the warps they allow are reported, but a
register-limited occupancy without local traffic is not called a bottleneck, because whether fewer
warps cost time depends on latency that these counters do not separate.
"""

from __future__ import annotations

from typing import ClassVar

from formulas.base import Formula
from formulas.throughput import UNITS, busiest_unit
from intelliperf.contract import Diagnosis
from intelliperf.contract.gpu_facts import facts_for
from intelliperf.contract.profile import Column, KernelProfile, Kind, Quantity, SourceRow

LOCAL_LD = Quantity.LOCAL_BYTES_LOADED
LOCAL_ST = Quantity.LOCAL_BYTES_STORED
GLOBAL_LD = Quantity.GLOBAL_BYTES_LOADED
GLOBAL_ST = Quantity.GLOBAL_BYTES_STORED
REGISTERS = Quantity.REGISTERS_PER_THREAD
BLOCKS_BY_REGISTERS = Quantity.BLOCKS_PER_SM_BY_REGISTERS
BLOCK_SIZE = Quantity.BLOCK_SIZE
ACHIEVED_OCCUPANCY = Quantity.ACHIEVED_OCCUPANCY_PCT
MIN_LOCAL_SHARE = 0.25
MIN_SAVING = 0.10
LOCAL_KINDS = (Kind.LOCAL_LOAD, Kind.LOCAL_STORE)


class RegisterPressure(Formula):
    name = "registerPressure"
    title = "Register pressure"
    metric_label = "local-memory bytes (spills and register-indexed arrays)"
    metrics: ClassVar[tuple[Quantity, ...]] = (
        LOCAL_LD,
        LOCAL_ST,
        GLOBAL_LD,
        GLOBAL_ST,
        REGISTERS,
        BLOCKS_BY_REGISTERS,
        ACHIEVED_OCCUPANCY,
    )
    units = UNITS

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        return kernel.metric(LOCAL_LD) + kernel.metric(LOCAL_ST)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        local = self.bottleneck_metric(kernel)
        global_ = kernel.metric(GLOBAL_LD) + kernel.metric(GLOBAL_ST)
        numbers = {"local_bytes": local, "global_bytes": global_, **_occupancy(kernel)}
        if local <= 0:
            return self.absent(
                kernel, "the kernel moves no local memory (no spills, no local arrays)", numbers
            )
        share = local / (local + global_)
        busy, unit = busiest_unit(kernel, self.units)
        saving = min(1.0, share * busy)
        numbers.update(local_share=round(share, 4), utilization=round(busy, 4))
        reasoning = (
            f"{share:.0%} of the {local + global_:,.0f} bytes the kernel moves through L1 are local memory "
            f"(threshold {MIN_LOCAL_SHARE:.0%}); the {unit} is {busy:.0%} busy, so keeping those values in "
            f"registers could save ~{saving:.0%} of the kernel's time (threshold {MIN_SAVING:.0%})"
        )
        if share < MIN_LOCAL_SHARE or saving < MIN_SAVING:
            return self.absent(kernel, reasoning, numbers)
        registers = numbers.get("registers_per_thread")
        limit = f" at {registers:.0f} registers per thread" if registers else ""
        return self.present(
            kernel,
            saving,
            summary=(
                f"{local / 1e9:,.2f} GB of local-memory traffic{limit}: values that do not fit in registers "
                f"are spilled and reloaded ({share:.0%} of L1 data traffic)"
            ),
            reasoning=reasoning,
            metrics=numbers,
            locations=self.hot_lines(
                kernel, _local_executed, label="local-memory instructions executed", numbers=_line
            ),
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "Values that do not fit in a thread's registers are spilled to local memory, and "
            "arrays indexed by run-time values live there too. Typical fixes: relax __launch_bounds__ "
            "(drop or lower its minimum-blocks argument) or -maxrregcount so the compiler may use more "
            "registers; shorten live ranges (compute values where they are used, split long loops); "
            "fully unroll loops over small arrays so their indices are constants; move arrays that "
            f"must be indexed dynamically to shared memory. {diagnosis.summary}."
        )


def _occupancy(kernel: KernelProfile) -> dict[str, float]:
    """Registers per thread and the warps per SM they allow (evidence, not part of the decision)."""
    numbers: dict[str, float] = {}
    registers = kernel.optional(REGISTERS)
    blocks = kernel.optional(BLOCKS_BY_REGISTERS)
    block_size = kernel.optional(BLOCK_SIZE)
    achieved = kernel.optional(ACHIEVED_OCCUPANCY)
    if registers is not None:
        numbers["registers_per_thread"] = registers
    if blocks is not None and block_size:
        facts = facts_for(kernel.arch)
        warps = min(facts.max_warps_per_sm, blocks * -(-block_size // facts.warp_size))
        numbers["warps_allowed_by_registers"] = warps
        numbers["occupancy_allowed_by_registers"] = round(warps / facts.max_warps_per_sm, 4)
    if achieved is not None:
        numbers["achieved_occupancy"] = round(achieved / 100.0, 4)
    return numbers


def _local_executed(row: SourceRow) -> float:
    return sum(i.metrics.get(Column.EXECUTED, 0.0) for i in row.instructions if i.kind in LOCAL_KINDS)


def _line(row: SourceRow) -> dict[str, float]:
    loads = sum(i.metrics.get(Column.EXECUTED, 0.0) for i in row.instructions if i.kind is Kind.LOCAL_LOAD)
    return {"local loads executed": loads, "local stores executed": _local_executed(row) - loads}

"""Atomic contention: many atomics on few addresses, serialized in one L2 slice.

Nsight Compute has no rule for this; ours rests on two measurements.

- Concentration. Global atomics execute in the L2 slice that owns the address. Spread
  over many addresses they spread over all slices: max/avg of the atomic sectors per slice is
  ~1 (1.02 measured for one atomicAdd per element into distinct addresses). On one address they
  all land in one slice: max/avg approaches the slice count (62.7 measured for a single-address
  reduction and for an 8-bin histogram on an H200). Present needs max/avg >= 8: atomics
  concentrated on at most an eighth of the slices.
- Cost. Same-address atomics are served one after another; the hot slice's atomic count times
  the measured service time (intelliperf.contract.gpu_facts) is time the kernel cannot beat. Its
  share of the kernel's time, times (1 - 1/concentration), is the saving if the atomics were spread or
  reduced first.
  Present needs a saving of at least 15%: a few hundred atomics at the end of a block
  reduction (the fixed examples: 6% and 10%) are the cure, not the disease.

Every atomic form counts: those whose old value is unused (reductions) and those that return it
(`slot = atomicAdd(count, 1)`, atomicCAS loops, Triton's `tl.atomic_add` whose result is used). The
backend says how it counts each (intelliperf.gpu.nvidia.metrics: on sm_90 Nsight Compute reports one of
its counters of the latter as `n/a`, so the largest that has a value is taken); with neither count (or no
L2 atomic counts) the formula does not decide.

Warp-stall samples are not collected: on reduction instructions they do not separate the two (the
uncontended scatter spends 93% of its samples on its reductions, throttled by memory bandwidth), and sampling
costs the counter pass a replay pass per kernel. Lines are ranked by atomic instructions executed.
"""

from __future__ import annotations

from typing import ClassVar

from formulas.base import Formula
from intelliperf.contract import Diagnosis
from intelliperf.contract.gpu_facts import facts_for
from intelliperf.contract.profile import Column, KernelProfile, Kind, Quantity, SourceRow

MIN_CONCENTRATION = 8.0
MIN_SAVING = 0.15


class AtomicContention(Formula):
    name = "atomicContention"
    title = "Atomic contention"
    metric_label = "atomic operations in the busiest L2 slice"
    metrics: ClassVar[tuple[Quantity, ...]] = (
        Quantity.ATOMIC_INSTRUCTIONS_NO_RETURN,
        Quantity.ATOMIC_INSTRUCTIONS_RETURN,
        Quantity.L2_ATOMICS_BUSIEST_SLICE,
        Quantity.L2_ATOMICS_MEAN_SLICE,
    )

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        return kernel.metric(Quantity.L2_ATOMICS_BUSIEST_SLICE)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        hot = self.bottleneck_metric(kernel)
        average = kernel.metric(Quantity.L2_ATOMICS_MEAN_SLICE)
        red = kernel.metric(Quantity.ATOMIC_INSTRUCTIONS_NO_RETURN)
        atom = kernel.metric(Quantity.ATOMIC_INSTRUCTIONS_RETURN)
        instructions = red + atom
        numbers = {
            "atomic_warp_instructions": instructions,
            "red_warp_instructions": red,
            "atom_warp_instructions": atom,
            "hot_slice_atomic_sectors": hot,
            "mean_slice_atomic_sectors": average,
        }
        if instructions <= 0 or average <= 0:
            return self.absent(kernel, "the kernel issues no global atomics", numbers)
        concentration = hot / average
        service_ns = facts_for(kernel.arch).same_address_atomic_ns
        if service_ns is None:
            return self.undecided(
                kernel, (), reason=f"no same-address atomic service time has been measured on {kernel.arch}"
            )
        serial_ns = hot * service_ns
        boundness = min(1.0, serial_ns / kernel.duration_ns) if kernel.duration_ns > 0 else 0.0
        saving = boundness * (1.0 - 1.0 / concentration)
        numbers.update(
            concentration=round(concentration, 3),
            serialized_ns=round(serial_ns, 1),
            serialized_share=round(boundness, 4),
        )
        reasoning = (
            f"the busiest L2 slice serves {concentration:.1f}x the mean slice's atomics (threshold "
            f"{MIN_CONCENTRATION:g}x); serialized there they take ~{serial_ns / 1e3:,.1f} us of the kernel's "
            f"{kernel.duration_ns / 1e3:,.1f} us, so spreading or pre-reducing them could save ~{saving:.0%} "
            f"(threshold {MIN_SAVING:.0%})"
        )
        if concentration < MIN_CONCENTRATION or saving < MIN_SAVING:
            return self.absent(kernel, reasoning, numbers)
        locations = self.hot_lines(kernel, _atomics_executed, label="atomic instructions executed")
        operations = instructions * facts_for(kernel.arch).warp_size
        return self.present(
            kernel,
            saving,
            summary=(
                f"{operations:,.0f} atomic operations converge on few addresses: one L2 slice serves "
                f"{concentration:.0f}x its share, serializing ~{boundness:.0%} of the kernel's time"
            ),
            reasoning=reasoning,
            metrics=numbers,
            locations=locations,
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "Atomics to the same address are executed one at a time by the L2 slice that owns it. "
            "Typical fixes: reduce within the warp (__shfl_down_sync) and the block (shared memory) "
            "first and issue one atomic per block; privatize histograms per block or per warp in shared "
            f"memory and merge once; cap the grid so fewer blocks add into the result. {diagnosis.summary}."
        )


def _atomics_executed(row: SourceRow) -> float:
    return sum(i.metrics.get(Column.EXECUTED, 0.0) for i in row.instructions if i.kind is Kind.GLOBAL_ATOMIC)

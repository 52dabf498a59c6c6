"""Uncoalesced global memory access: a warp's loads or stores touch more 32-byte sectors than needed.

Decision. For every global load and store, Nsight Compute computes the sectors the access
pattern needs at minimum ("L2 Theoretical Sectors Global Ideal") and the ones beyond that
("... Excessive"). The excess share of all global sectors says how much of the memory traffic is
waste; the busiest memory unit's utilization (DRAM, L2 or L1) says how much that traffic costs.
Estimated saving = excess share x memory utilization.

Present when the excess share is at least 25% (the coalesced controls and fixed versions
measure 0%; the strided copy and the array-of-structs read 50% and more) and the estimated
saving is at least 5% of the kernel's time.
"""

from __future__ import annotations

from typing import ClassVar

from formulas.base import Formula, KernelProfile, SourceRow, severity_for
from intelliperf.contract import Diagnosis

EXCESSIVE = "L2 Theoretical Sectors Global Excessive"
SECTORS = "L2 Theoretical Sectors Global"
IDEAL = "L2 Theoretical Sectors Global Ideal"
UTILIZATION = (
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
)

MIN_EXCESS_SHARE = 0.25
MIN_SAVING = 0.05


class MemoryAccess(Formula):
    name = "memoryAccess"
    title = "Uncoalesced global memory access"
    metric_label = "excessive global-memory sectors"
    metrics: ClassVar[tuple[str, ...]] = (
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
        *UTILIZATION,
    )

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        return kernel.instruction_total(EXCESSIVE)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        excessive = kernel.instruction_total(EXCESSIVE)
        sectors = kernel.instruction_total(SECTORS)
        utilization = max(kernel.metric(m) for m in UTILIZATION) / 100.0
        numbers = {
            "excessive_sectors": excessive,
            "global_sectors": sectors,
            "ideal_sectors": kernel.instruction_total(IDEAL),
            "memory_utilization": round(utilization, 4),
            "load_sectors_per_request": _ratio(kernel, "ld"),
            "store_sectors_per_request": _ratio(kernel, "st"),
        }
        if sectors <= 0:
            return self.absent(kernel, "the kernel makes no global loads or stores", numbers)
        share = excessive / sectors
        saving = min(1.0, share * utilization)
        numbers["excess_share"] = round(share, 4)
        reasoning = (
            f"{share:.0%} of {sectors:,.0f} global sectors are excessive (threshold {MIN_EXCESS_SHARE:.0%}); "
            f"the busiest memory unit is {utilization:.0%} utilized, so coalescing could save ~{saving:.0%} "
            f"of the kernel's time (threshold {MIN_SAVING:.0%})"
        )
        if share < MIN_EXCESS_SHARE or saving < MIN_SAVING:
            return self.absent(kernel, reasoning, numbers)
        locations = self.hot_lines(
            kernel, lambda row: row.get(EXCESSIVE), label=EXCESSIVE, numbers=_line_numbers
        )
        return Diagnosis(
            kernel=kernel.name,
            formula=self.name,
            present=True,
            severity=severity_for(saving, True),
            estimated_saving_ns=saving * kernel.duration_ns,
            estimated_saving_fraction=round(saving, 4),
            summary=(
                f"global accesses move {sectors / max(sectors - excessive, 1.0):.1f}x the sectors they need: "
                f"{share:.0%} of global memory traffic is wasted"
            ),
            reasoning=reasoning,
            metrics=numbers,
            locations=locations,
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "Global memory moves 32-byte sectors; a warp's access is coalesced when its 32 threads touch "
            "consecutive addresses. Typical fixes: make consecutive threads handle consecutive elements, "
            "turn arrays of structs into structs of arrays, stage strided accesses through shared memory, "
            f"use wider (float4) loads. {diagnosis.summary}."
        )


def _ratio(kernel: KernelProfile, op: str) -> float:
    requests = kernel.metric(f"l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum")
    sectors = kernel.metric(f"l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum")
    return round(sectors / requests, 3) if requests else 0.0


def _line_numbers(row: SourceRow) -> dict[str, float]:
    return {SECTORS: row.get(SECTORS), IDEAL: row.get(IDEAL)}

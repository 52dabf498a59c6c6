"""Memory locality: data that is reused is fetched again from L2 instead of being kept on chip.

Kept apart from uncoalesced access (memoryAccess), which is waste inside one warp request: here
each request may be perfectly coalesced, but the same bytes are requested again and again (a
stencil's neighbours, a matrix row read by every block) and the reuse is served by L2 rather than
by L1, shared memory or registers.

Numbers: the sectors the kernel's global loads need at best (requested bytes / 32; on NVIDIA the
source page's ideal L2 sectors of its global load instructions), the sectors L1 actually fetched from
L2 and the sectors L2 read from DRAM. L2 reuse = min(ideal, fetched) / DRAM: how often each byte that
came from DRAM was fetched from L2 again. Taking the ideal bounds away the excess of uncoalesced
requests, so a strided copy whose neighbours hit in cache measures ~1, not its excess. The bytes used
per sector (what Nsight Compute's MemoryCacheAccessPattern rule reads) is reported beside them. The L1
and L2 hit rates are not collected: they decide nothing here and cost the counter pass a replay pass
per kernel (intelliperf/gpu/nvidia/metrics.py); the reuse says what they would.

Decision: present when the L2 reuse is at least 4 and the estimated saving, the L2's utilization
times the share of its traffic that on-chip reuse would remove (1 - 1/reuse), is at least 10%.
"""

from __future__ import annotations

from typing import ClassVar

from formulas.base import Formula
from formulas.throughput import busiest_unit
from intelliperf.contract import Diagnosis
from intelliperf.contract.profile import Column, KernelProfile, Kind, Quantity, SourceRow

FETCHED = Quantity.L2_SECTORS_READ_BY_L1
DRAM_READ = Quantity.DRAM_SECTORS_READ
BYTES_PER_SECTOR = Quantity.BYTES_USED_PER_SECTOR_PCT

MIN_REUSE = 4.0
MIN_SAVING = 0.10


class MemoryLocality(Formula):
    name = "memoryLocality"
    title = "Poor memory locality"
    metric_label = "sectors fetched from L2 by L1"
    metrics: ClassVar[tuple[Quantity, ...]] = (
        Quantity.GLOBAL_LOAD_SECTORS_IDEAL,
        FETCHED,
        DRAM_READ,
        BYTES_PER_SECTOR,
    )
    units = ("L2 cache",)

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        return kernel.metric(FETCHED)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        ideal = kernel.metric(Quantity.GLOBAL_LOAD_SECTORS_IDEAL)
        fetched = kernel.metric(FETCHED)
        dram = kernel.metric(DRAM_READ)
        busy, _ = busiest_unit(kernel, self.units)
        numbers = {
            "ideal_load_sectors": ideal,
            "l2_sectors_fetched_by_l1": fetched,
            "dram_sectors_read": dram,
            "l2_utilization": round(busy, 4),
            **_evidence(kernel),
        }
        needed = min(ideal, fetched)
        if needed <= 0:
            return self.absent(kernel, "the kernel's global loads fetch nothing from L2", numbers)
        reuse = needed / max(dram, 1.0)
        saving = min(1.0, busy * max(0.0, 1.0 - 1.0 / reuse))
        numbers["l2_reuse"] = round(reuse, 3)
        reasoning = (
            f"each sector read from DRAM was fetched from L2 {reuse:.1f} times by the loads (threshold "
            f"{MIN_REUSE:g}); L2 is {busy:.0%} busy, so keeping the reused data on chip could save "
            f"~{saving:.0%} of the kernel's time (threshold {MIN_SAVING:.0%})"
        )
        if reuse < MIN_REUSE or saving < MIN_SAVING:
            return self.absent(kernel, reasoning, numbers)
        return self.present(
            kernel,
            saving,
            summary=(
                f"global loads fetch each byte from L2 {reuse:.0f} times: reused data is not kept in L1, "
                "shared memory or registers"
            ),
            reasoning=reasoning,
            metrics=numbers,
            locations=self.hot_lines(kernel, _ideal_load_sectors, label="load sectors requested"),
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "The kernel reads the same data many times, and the reuse is served by L2 instead of on chip. "
            "Typical fixes: stage a tile (with its halo) in shared memory once per block and read the "
            "neighbours from there; keep a sliding window in registers when a thread walks along the "
            "reused dimension; make each block compute several outputs that share inputs; order blocks "
            f"so that those sharing data run together. {diagnosis.summary}."
        )


def _evidence(kernel: KernelProfile) -> dict[str, float]:
    used = kernel.optional(BYTES_PER_SECTOR)
    return {} if used is None else {"bytes_used_per_sector_pct": round(used, 2)}


def _ideal_load_sectors(row: SourceRow) -> float:
    return sum(
        i.metrics.get(Column.GLOBAL_SECTORS_IDEAL, 0.0)
        for i in row.instructions
        if i.kind is Kind.GLOBAL_LOAD
    )

"""Shared-memory bank conflicts: a warp's shared access split into several wavefronts.

Decision (see excess.py): the excess share of shared-memory work (NVIDIA: excessive over all
shared wavefronts, per instruction, summed; AMD: LDS bank-conflict cycles over LDS-active cycles) times
the shared pipe's utilization. Present when the excess share is at least 20% (one extra wavefront per four
accesses: the padded transpose and the sequential-address reduction measure 0%, their
conflicting originals 93% and 65%) and the estimated saving is at least 5% of the kernel's time
(conflicts on an idle shared pipe are not a bottleneck).

On NVIDIA the kernel-level bank-conflict counters are not collected: they say what the excessive
wavefronts already say, and cost the counter pass a replay pass per kernel (ncu on an H100: the
formulas' metrics took 9 replay passes with them and memoryAccess's sector/request counters, 5 without).
"""

from __future__ import annotations

from typing import ClassVar

from formulas.excess import ExcessShareFormula
from intelliperf.contract import Diagnosis
from intelliperf.contract.profile import Column, KernelProfile, Quantity


class BankConflict(ExcessShareFormula):
    name = "bankConflict"
    title = "Shared-memory bank conflicts"
    metric_label = "excessive shared-memory wavefronts"
    excessive = Quantity.SHARED_ACCESS_UNITS_EXCESS
    total = Quantity.SHARED_ACCESS_UNITS
    ideal = Quantity.SHARED_ACCESS_UNITS_IDEAL
    excessive_column = Column.SHARED_ACCESS_UNITS_EXCESS
    total_column = Column.SHARED_ACCESS_UNITS
    ideal_column = Column.SHARED_ACCESS_UNITS_IDEAL
    unit = "shared-memory wavefronts"
    min_excess_share = 0.20
    min_saving = 0.05
    metrics: ClassVar[tuple[Quantity, ...]] = (
        Quantity.SHARED_PIPE_BUSY_PCT,
        Quantity.SHARED_ACCESS_UNITS,
        Quantity.SHARED_ACCESS_UNITS_IDEAL,
        Quantity.SHARED_ACCESS_UNITS_EXCESS,
        Quantity.ISSUE_BUSY_PCT,
    )
    untouched = ("DRAM", "L2 cache")
    """Shared-memory traffic never reaches L2 or DRAM (L1 is not among them: it carries the wavefronts)."""
    units = untouched

    def utilization(self, kernel: KernelProfile) -> tuple[float, str]:
        return kernel.metric(Quantity.SHARED_PIPE_BUSY_PCT) / 100.0, "shared-memory pipe"

    def summary(self, share: float, ratio: float) -> str:
        return (
            f"shared-memory accesses need {ratio:.1f}x the ideal wavefronts: {share:.0%} of shared "
            f"traffic is bank-conflict overhead"
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "Shared memory has 32 banks of 4 bytes; a warp's access is split into one wavefront per "
            "distinct address in the same bank. Typical fixes: pad 2-D tiles by one element per row "
            "(tile[32][33]), use sequential instead of strided indexing in reductions, or swizzle the "
            f"index. {diagnosis.summary}."
        )

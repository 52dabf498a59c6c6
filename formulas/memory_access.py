"""Uncoalesced global memory access: a warp's loads or stores touch more 32-byte sectors than needed.

Decision (see excess.py): the excess share of global sectors (NVIDIA: the excessive over all
theoretical L2 sectors of global accesses, per instruction, summed; AMD: the vL1D's thread-requests of
loads and stores beyond 16 per wavefront instruction) times the busiest memory unit's
utilization (DRAM, L2 or L1). Present when the excess share is at least
25% (the coalesced controls and fixed versions measure 0%; the strided copy and the
array-of-structs read 50% and more) and the estimated saving is at least 5% of the kernel's time.
"""

from __future__ import annotations

from typing import ClassVar

from formulas.excess import ExcessShareFormula
from formulas.throughput import UNITS, busiest_unit
from intelliperf.contract import Diagnosis
from intelliperf.contract.profile import Column, KernelProfile, Quantity


class MemoryAccess(ExcessShareFormula):
    name = "memoryAccess"
    title = "Uncoalesced global memory access"
    metric_label = "excessive global-memory sectors"
    excessive = Quantity.GLOBAL_SECTORS_EXCESS
    total = Quantity.GLOBAL_SECTORS
    ideal = Quantity.GLOBAL_SECTORS_IDEAL
    excessive_column = Column.GLOBAL_SECTORS_EXCESS
    total_column = Column.GLOBAL_SECTORS
    ideal_column = Column.GLOBAL_SECTORS_IDEAL
    unit = "global sectors"
    min_excess_share = 0.25
    min_saving = 0.05
    metrics: ClassVar[tuple[Quantity, ...]] = (
        Quantity.GLOBAL_SECTORS,
        Quantity.GLOBAL_SECTORS_IDEAL,
        Quantity.GLOBAL_SECTORS_EXCESS,
        Quantity.ISSUE_BUSY_PCT,
    )
    units = UNITS

    def utilization(self, kernel: KernelProfile) -> tuple[float, str]:
        return busiest_unit(kernel, self.units)

    def summary(self, share: float, ratio: float) -> str:
        return (
            f"global accesses move {ratio:.1f}x the sectors they need: "
            f"{share:.0%} of global memory traffic is wasted"
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "Global memory moves 32-byte sectors; a warp's access is coalesced when its 32 threads touch "
            "consecutive addresses. Typical fixes: make consecutive threads handle consecutive elements, "
            "turn arrays of structs into structs of arrays, stage strided accesses through shared memory, "
            f"use wider (float4) loads. {diagnosis.summary}."
        )

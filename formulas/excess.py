"""The shared shape of two formulas: a share of some traffic is waste, and its unit is this busy.

The backend measures the units a kernel's accesses took (`total`), those they need at best (`ideal`) and
those beyond (`excessive`): Nsight Compute per instruction, summed over the kernel; rocprofv3 per kernel.
The excess share of all units is the waste; `utilization` says how much that traffic costs the kernel.
Estimated saving = share x utilization. Present when both the share and the saving reach the subclass's
thresholds. Lines are ranked by the per-instruction excess (`excessive_column`) where the backend
attributes counters to instructions.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from formulas.base import Formula
from intelliperf.contract import Diagnosis
from intelliperf.contract.profile import Column, KernelProfile, Quantity, SourceRow

__all__ = ["ExcessShareFormula"]


class ExcessShareFormula(Formula):
    excessive: ClassVar[Quantity]
    total: ClassVar[Quantity]
    ideal: ClassVar[Quantity]
    excessive_column: ClassVar[Column]
    total_column: ClassVar[Column]
    ideal_column: ClassVar[Column]
    unit: ClassVar[str]
    """What the columns count, in words (e.g. 'shared wavefronts')."""
    min_excess_share: ClassVar[float]
    min_saving: ClassVar[float]

    @abstractmethod
    def utilization(self, kernel: KernelProfile) -> tuple[float, str]:
        """How busy the unit carrying this traffic is (0..1), and its name."""

    @abstractmethod
    def summary(self, share: float, ratio: float) -> str:
        """One sentence for the report, from the excess share and the actual/ideal ratio."""

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        return kernel.metric(self.excessive)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        excessive = kernel.metric(self.excessive)
        total = kernel.metric(self.total)
        ideal = kernel.metric(self.ideal)
        busy, unit_name = self.utilization(kernel)
        numbers = {
            "excessive": excessive,
            "total": total,
            "ideal": ideal,
            "utilization": round(busy, 4),
        }
        if total <= 0:
            return self.absent(kernel, f"the kernel moves no {self.unit}", numbers)
        share = excessive / total
        saving = min(1.0, share * busy)
        numbers["excess_share"] = round(share, 4)
        numbers["actual_to_ideal"] = round(total / max(ideal, 1.0), 3)
        reasoning = (
            f"{share:.0%} of {total:,.0f} {self.unit} are excessive (threshold {self.min_excess_share:.0%}); "
            f"the {unit_name} is {busy:.0%} busy, so removing the excess could save ~{saving:.0%} of the "
            f"kernel's time (threshold {self.min_saving:.0%})"
        )
        if share < self.min_excess_share or saving < self.min_saving:
            return self.absent(kernel, reasoning, numbers)
        locations = self.hot_lines(
            kernel,
            lambda row: row.get(self.excessive_column),
            label=f"excessive {self.unit}",
            numbers=self._line,
        )
        return self.present(
            kernel,
            saving,
            summary=self.summary(share, total / max(ideal, 1.0)),
            reasoning=reasoning,
            metrics=numbers,
            locations=locations,
        )

    def _line(self, row: SourceRow) -> dict[str, float]:
        return {self.unit: row.get(self.total_column), f"ideal {self.unit}": row.get(self.ideal_column)}

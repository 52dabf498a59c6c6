"""The shared shape of two formulas: a share of some traffic is waste, and its unit is this busy.

The backend measures the units a kernel's accesses took (`total`), those they need at best (`ideal`) and
those beyond (`excessive`): Nsight Compute per instruction, summed over the kernel; rocprofv3 per kernel.
The excess share of all units is the waste; `utilization` says how much that traffic costs the kernel.
Estimated saving = share x utilization, but no more than what the resources the fix leaves alone allow:
the issue slots and the subclass's `untouched` memory units keep the time they already need, so the
saving is at most 1 - the busiest of them. (Calibrated on the measured fixes of
benchmarks/results/diagnose.json: reduction_bank's conflicts were estimated at 56% where its fix
saved 20%, because its issue slots were 70% busy before and after; the bound says 30%.
transpose_bank: 80% estimated, 52% measured; its L2 at 41% bounds it to 59%.) Present when both the
share and the saving reach the subclass's thresholds. Lines are ranked by the per-instruction excess
(`excessive_column`) where the backend attributes counters to instructions.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from formulas.base import Formula
from formulas.throughput import unit_utilization
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
    untouched: ClassVar[tuple[str, ...]] = ()
    """Memory units (formulas.throughput) whose traffic removing the excess leaves as it is."""

    def untouched_busy(self, kernel: KernelProfile) -> tuple[float, str] | None:
        """The busiest of the issue slots and the untouched units that were measured (a unit without a
        value bounds nothing: it is not read as idle)."""
        measured = {unit: unit_utilization(kernel, unit) for unit in self.untouched}
        issue = kernel.optional(Quantity.ISSUE_BUSY_PCT)
        measured["issue slots"] = issue / 100.0 if issue is not None else None
        known = {name: value for name, value in measured.items() if value is not None}
        if not known:
            return None
        name = max(known, key=known.__getitem__)
        return known[name], name

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
        bound = ""
        floor = self.untouched_busy(kernel)
        if floor is not None and 1.0 - floor[0] < saving:
            saving = max(0.0, 1.0 - floor[0])
            numbers["bounded_by"] = round(floor[0], 4)
            bound = f", no more than the {floor[1]} ({floor[0]:.0%} busy, left as they are) allow"
        numbers["excess_share"] = round(share, 4)
        numbers["actual_to_ideal"] = round(total / max(ideal, 1.0), 3)
        reasoning = (
            f"{share:.0%} of {total:,.0f} {self.unit} are excessive (threshold {self.min_excess_share:.0%}); "
            f"the {unit_name} is {busy:.0%} busy, so removing the excess could save ~{saving:.0%} of the "
            f"kernel's time{bound} (threshold {self.min_saving:.0%})"
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

"""What every formula is: the metrics it needs, how it decides, how it localizes, what it tells the LLM.

A formula reads one kernel's profile (kernel-level quantities plus per-instruction counters attributed
to source lines, in the vendor-neutral terms of intelliperf.contract.profile) and returns a
`Diagnosis`. It never runs a profiler itself, so every formula can be tested on recorded profiles
without a GPU.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar

from intelliperf.contract import Diagnosis, Severity, SourceLocation
from intelliperf.contract.gpu_facts import UnknownArchitectureError
from intelliperf.contract.profile import KernelProfile, MissingMetricError, Quantity, SourceRow

__all__ = ["Formula", "is_toolkit_file", "severity_for"]

TOOLKIT_MARKERS = ("/cuda/include/", "/cuda/targets/", "/cuda-", "/nvidia/cuda", "/site-packages/triton/")


def is_toolkit_file(path: str) -> bool:
    return any(marker in path for marker in TOOLKIT_MARKERS) or path.startswith("/usr/include/")


def severity_for(saving_fraction: float, present: bool) -> Severity:
    """Severity from the share of the kernel's time that fixing the bottleneck could save."""
    if not present:
        return "none"
    if saving_fraction >= 0.30:
        return "high"
    if saving_fraction >= 0.10:
        return "medium"
    return "low"


class Formula(ABC):
    """One bottleneck. Subclasses set the class attributes and implement `diagnose`."""

    name: ClassVar[str]
    title: ClassVar[str]
    metrics: ClassVar[tuple[Quantity, ...]]
    """The quantities the formula reads (intelliperf.contract.profile), beside its memory units'."""
    units: ClassVar[tuple[str, ...]] = ()
    """Memory units whose utilization the formula reads (formulas.throughput), beside `metrics`."""
    source_columns: ClassVar[tuple[str, ...]] = ()
    metric_label: ClassVar[str]
    """What `bottleneck_metric` measures, in words (shown with the values before and after)."""

    @abstractmethod
    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        """Decide on one kernel. May raise MissingMetricError: `evaluate` turns it into an undecided
        diagnosis; call `evaluate`, not this."""

    def evaluate(self, kernel: KernelProfile) -> Diagnosis:
        """The diagnosis, or where a metric it needs has no value, a diagnosis that says it could not
        decide and which metrics were missing."""
        try:
            return self.diagnose(kernel)
        except MissingMetricError as missing:
            return self.undecided(kernel, missing.names)
        except UnknownArchitectureError as unknown:
            return self.undecided(kernel, (), reason=str(unknown))

    def undecided(
        self, kernel: KernelProfile, missing: Sequence[str], *, reason: str | None = None
    ) -> Diagnosis:
        """A diagnosis that makes no claim: metrics without a value, or (``reason``) facts it lacks."""
        names = ", ".join(missing)
        if reason is None:
            summary = f"no value for {names}"
            reason = (
                f"the profiler reported {names} as n/a or did not report it for this kernel; a missing "
                "value is not read as 0"
            )
        else:
            summary = reason
        return Diagnosis(
            kernel=kernel.name,
            formula=self.name,
            present=False,
            decided=False,
            severity="none",
            estimated_saving_ns=0.0,
            estimated_saving_fraction=0.0,
            summary=f"Could not decide on {self.title.lower()}: {summary}.",
            reasoning=f"{reason}, so this formula makes no claim either way",
        )

    @abstractmethod
    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        """The number an optimization must reduce for this formula to call it a success."""

    min_metric_gain: ClassVar[float] = 0.05
    """An optimization improves the metric when it removes at least this share of it (or all of it)."""

    def metric_improved(self, before: float, after: float) -> bool:
        return after <= 0 or after <= before * (1 - self.min_metric_gain)

    @abstractmethod
    def prompt_context(self, diagnosis: Diagnosis) -> str:
        """What the LLM should know about this bottleneck, in plain words, for this diagnosis."""

    def hot_lines(
        self,
        kernel: KernelProfile,
        weight: Callable[[SourceRow], float],
        *,
        label: str,
        numbers: Callable[[SourceRow], dict[str, float]] | None = None,
        limit: int = 3,
        min_share: float = 0.05,
    ) -> list[SourceLocation]:
        """The source lines that carry the most `weight`, with their share and the code around them.

        Lines in the CUDA toolkit's own headers (an inlined atomicAdd, say) are passed over when the
        same instructions are also attributed to a line of the user's code.
        """
        weighted = [(row, weight(row)) for row in kernel.source]
        weighted = [(row, w) for row, w in weighted if w > 0]
        user = [(row, w) for row, w in weighted if not is_toolkit_file(row.file)]
        weighted = user or weighted
        total = sum(w for _, w in weighted)
        if total <= 0:
            return []
        locations: list[SourceLocation] = []
        for row, value in sorted(weighted, key=lambda item: item[1], reverse=True)[:limit]:
            share = value / total
            if share < min_share and locations:
                break
            locations.append(
                SourceLocation(
                    file=row.file,
                    line=row.line,
                    share=round(min(1.0, share), 4),
                    metrics={label: value, **(numbers(row) if numbers else {})},
                    code=kernel.code_around(row.file, row.line),
                )
            )
        return locations

    def present(
        self,
        kernel: KernelProfile,
        saving: float,
        *,
        summary: str,
        reasoning: str,
        metrics: dict[str, float],
        locations: list[SourceLocation],
    ) -> Diagnosis:
        """The bottleneck is there; ``saving`` is the share of the kernel's time removing it could save."""
        return Diagnosis(
            kernel=kernel.name,
            formula=self.name,
            present=True,
            severity=severity_for(saving, True),
            estimated_saving_ns=saving * kernel.duration_ns,
            estimated_saving_fraction=round(saving, 4),
            summary=summary,
            reasoning=reasoning,
            metrics=metrics,
            locations=locations,
        )

    def absent(self, kernel: KernelProfile, reasoning: str, metrics: dict[str, float]) -> Diagnosis:
        return Diagnosis(
            kernel=kernel.name,
            formula=self.name,
            present=False,
            severity="none",
            estimated_saving_ns=0.0,
            estimated_saving_fraction=0.0,
            summary=f"No {self.title.lower()}.",
            reasoning=reasoning,
            metrics=metrics,
        )

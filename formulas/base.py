"""What every formula is: the metrics it needs, how it decides, how it localizes, what it tells the LLM.

A formula reads one kernel's profile (kernel-level Nsight Compute metrics plus per-source-line
counters) and returns a `Diagnosis`. It never runs a profiler itself, so every formula can be tested
on recorded profiles without a GPU.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from intelliperf.contract import Diagnosis, Severity, SourceLine, SourceLocation

__all__ = ["CONTEXT_LINES", "Formula", "KernelProfile", "SourceRow", "severity_for"]

CONTEXT_LINES = 4


@dataclass(frozen=True)
class SourceRow:
    """One source line of one kernel with the per-line counters Nsight Compute attributes to it."""

    file: str
    line: int
    code: str
    metrics: Mapping[str, float]

    def get(self, column: str) -> float:
        return self.metrics.get(column, 0.0)


@dataclass(frozen=True)
class KernelProfile:
    """Everything known about one kernel: tracer timings, counters, source-line counters and source."""

    name: str
    demangled: str
    duration_ns: float
    metrics: Mapping[str, float]
    source: Sequence[SourceRow] = ()
    source_text: Mapping[str, Sequence[str]] = field(default_factory=dict)
    launches: int = 1
    total_ns: float = 0.0

    def metric(self, name: str) -> float:
        """A metric's value, 0.0 if absent or not a number (missing counters never raise)."""
        value = self.metrics.get(name)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return 0.0
        return float(value)

    def source_total(self, column: str) -> float:
        return sum(row.get(column) for row in self.source)

    def code_around(self, file: str, line: int, context: int = CONTEXT_LINES) -> list[SourceLine]:
        lines = self.source_text.get(file)
        if lines is None:
            rows = [r for r in self.source if r.file == file and abs(r.line - line) <= context]
            return [SourceLine(line=r.line, text=r.code, hot=r.line == line) for r in rows]
        first = max(1, line - context)
        last = min(len(lines), line + context)
        return [SourceLine(line=n, text=lines[n - 1], hot=n == line) for n in range(first, last + 1)]


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
    metrics: ClassVar[tuple[str, ...]]
    source_columns: ClassVar[tuple[str, ...]] = ()
    primary_metric: ClassVar[str]
    """The number an optimization must reduce for this formula to call it a success."""

    @abstractmethod
    def diagnose(self, kernel: KernelProfile) -> Diagnosis: ...

    @abstractmethod
    def prompt_context(self, diagnosis: Diagnosis) -> str:
        """What the LLM should know about this bottleneck, in plain words, for this diagnosis."""

    def hot_lines(
        self, kernel: KernelProfile, column: str, *, limit: int = 3, min_share: float = 0.05
    ) -> list[SourceLocation]:
        """The source lines carrying the most of `column`, with their share and code around them."""
        total = kernel.source_total(column)
        if total <= 0:
            return []
        merged: dict[tuple[str, int], float] = {}
        for row in kernel.source:
            value = row.get(column)
            if value > 0:
                merged[(row.file, row.line)] = merged.get((row.file, row.line), 0.0) + value
        ranked = sorted(merged.items(), key=lambda item: item[1], reverse=True)
        locations = []
        for (file, line), value in ranked[:limit]:
            share = value / total
            if share < min_share and locations:
                break
            numbers = {column: value}
            for other in self.source_columns:
                numbers[other] = sum(r.get(other) for r in kernel.source if r.file == file and r.line == line)
            locations.append(
                SourceLocation(
                    file=file,
                    line=line,
                    share=round(min(1.0, share), 4),
                    metrics=numbers,
                    code=kernel.code_around(file, line),
                )
            )
        return locations

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

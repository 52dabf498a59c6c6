"""Speedup of a candidate over the reference, from kernel time measured by the tracer.

Each run is one execution of the application under libaccordo's tracer; its kernel time is the sum
over every launch of the target kernel. Reference and candidate runs alternate (A B A B ...), so a
slow drift of the GPU (clocks, temperature) lands on both sides alike. The speedup of pair i is
``reference_i / candidate_i``; the point estimate is the median of those ratios and the 95% interval
is Student's t interval of their mean log (ratios of times are close to log-normal). An interval
containing 1 is "no significant change".
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from intelliperf.contract.report import Speedup
from intelliperf.errors import ProfileError

from .trace import KernelLaunch, run_traced

__all__ = ["FLAG_ABOVE", "KernelTimes", "measure_speedup", "speedup_from_times", "t_quantile_975"]

FLAG_ABOVE = 10.0
METHOD = (
    "CUPTI kernel time summed over all launches per run; reference and candidate runs interleaved "
    "(ABAB); median of per-pair ratios; 95% Student-t interval of the mean log ratio"
)

# Two-sided 95% quantiles of Student's t distribution by degrees of freedom.
_T975 = {
    1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
    11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
    20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
    29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980,
}  # fmt: skip


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` degrees of freedom (table lookup, conservative
    between tabulated values)."""
    if df < 1:
        raise ValueError("degrees of freedom must be at least 1")
    if df in _T975:
        return _T975[df]
    smaller = [k for k in _T975 if k < df]
    if df > 120:
        return 1.960
    return _T975[max(smaller)]


@dataclass(frozen=True)
class KernelTimes:
    """One side's runs: kernel time (ns, summed over launches) and application wall time per run."""

    kernel_ns: tuple[int, ...]
    wall_s: tuple[float, ...]
    launches: tuple[int, ...]


def speedup_from_times(reference: KernelTimes, candidate: KernelTimes) -> Speedup:
    """The speedup statistics of paired runs (pair i: reference run i and candidate run i)."""
    n = len(reference.kernel_ns)
    if n != len(candidate.kernel_ns) or n == 0:
        raise ValueError("reference and candidate need the same, non-zero number of runs")
    if min(reference.kernel_ns) <= 0 or min(candidate.kernel_ns) <= 0:
        raise ValueError("kernel times must be positive")
    ratios = [r / c for r, c in zip(reference.kernel_ns, candidate.kernel_ns, strict=True)]
    median = statistics.median(ratios)
    if n >= 2:
        logs = [math.log(r) for r in ratios]
        half = t_quantile_975(n - 1) * statistics.stdev(logs) / math.sqrt(n)
        low, high = math.exp(statistics.fmean(logs) - half), math.exp(statistics.fmean(logs) + half)
    else:
        low = high = median
    significant = n >= 2 and (low > 1.0 or high < 1.0)
    verdict = "no significant change" if not significant else ("faster" if low > 1.0 else "slower")
    return Speedup(
        median=median,
        low=low,
        high=high,
        significant=significant,
        verdict=verdict,
        reference_ns=float(statistics.median(reference.kernel_ns)),
        candidate_ns=float(statistics.median(candidate.kernel_ns)),
        runs=n,
        flagged_for_review=median > FLAG_ABOVE,
        reference_wall_s=statistics.median(reference.wall_s) if reference.wall_s else None,
        candidate_wall_s=statistics.median(candidate.wall_s) if candidate.wall_s else None,
        method=METHOD,
    )


def _matching(launches: Sequence[KernelLaunch], pattern: re.Pattern[str]) -> list[KernelLaunch]:
    return [x for x in launches if pattern.search(x.name) or pattern.search(x.demangled)]


def measure_speedup(
    reference: Sequence[str],
    candidate: Sequence[str],
    *,
    kernel_regex: str,
    runs: int,
    min_runs: int | None = None,
    timeout_s: float,
    reference_cwd: str | Path | None = None,
    candidate_cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    library: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> Speedup:
    """Run reference and candidate ``runs`` times each, alternating, under the tracer. With
    ``min_runs``, stop after that many pairs or more as soon as the 95% interval excludes 1 (the
    optimization loop's budget: a clear speedup needs few runs, a doubtful one gets all of them).

    Raises AppError if a run fails (the candidate passed its correctness check, so it should not) and
    ProfileError if a run launches the kernel a different number of times than the first run of its side.
    """
    if runs < 2:
        raise ValueError("at least 2 runs per side are needed for an interval")
    pattern = re.compile(kernel_regex)
    sides = {"reference": (reference, reference_cwd), "candidate": (candidate, candidate_cwd)}
    kernel_ns: dict[str, list[int]] = {"reference": [], "candidate": []}
    wall: dict[str, list[float]] = {"reference": [], "candidate": []}
    counts: dict[str, list[int]] = {"reference": [], "candidate": []}
    for i in range(runs):
        for side, (cmd, cwd) in sides.items():
            traced = run_traced(cmd, cwd=cwd, env=env, timeout_s=timeout_s, library=library)
            launches = _matching(traced.launches, pattern)
            if not launches:
                raise ProfileError(f"the {side}'s run {i + 1} launched no kernel matching {kernel_regex!r}")
            if counts[side] and len(launches) != counts[side][0]:
                raise ProfileError(
                    f"the {side} launched the kernel {counts[side][0]} times in its first timed run and "
                    f"{len(launches)} times in run {i + 1}"
                )
            kernel_ns[side].append(sum(x.duration_ns for x in launches))
            wall[side].append(traced.wall_s)
            counts[side].append(len(launches))
        if progress is not None:
            ratio = kernel_ns["reference"][-1] / kernel_ns["candidate"][-1]
            progress(f"timing run {i + 1}/{runs}: speedup {ratio:.3f}x")
        result = speedup_from_times(
            KernelTimes(tuple(kernel_ns["reference"]), tuple(wall["reference"]), tuple(counts["reference"])),
            KernelTimes(tuple(kernel_ns["candidate"]), tuple(wall["candidate"]), tuple(counts["candidate"])),
        )
        if min_runs is not None and i + 1 >= min_runs and result.significant:
            break
    if min_runs is not None and result.runs < runs:
        result = result.model_copy(
            update={"method": f"{result.method}; stopped after {result.runs} pairs, the interval excluding 1"}
        )
    return result

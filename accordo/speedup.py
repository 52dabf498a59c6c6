"""Speedup of a candidate over the reference, from kernel time measured inside the applications.

Each run is one execution of the application under the native profiler; its kernel time is the sum over every
launch of the target kernel, timed by one of two instruments (``timer``):

* ``events`` (default): a CUDA event pair recorded around each launch on its stream (the profiler's time
  mode, ``accordo.timing``), with no CUPTI activity enabled; each timed launch starts on an idle device
  with no persisting L2 lines (the ``quiesce`` setting): work the program put on another stream neither
  overlaps it nor escapes its events, and an access-policy window left set buys nothing;
* ``cupti``: the tracer's CUPTI kernel activity records (``profiler.trace``).

On an H100, CUPTI's activity records slowed some memory-bound kernels by 3-5 us per launch and moved
their speedups by 3-7% against the same kernels timed by events (``benchmarks/speedup_probe.py``), while
both instruments agreed on compute- and atomic-bound kernels up to the events' fixed cost of about
2.5 us per launch. Hence events by default. The first launch of each kernel in a run is left out as a
warm-up when the kernel runs more than once (``warm_durations``).

Reference and candidate runs alternate (A B A B ...), so a slow drift of the GPU (clocks, temperature)
lands on both sides alike. The speedup of pair i is ``reference_i / candidate_i``; the point estimate is
the median of those ratios and the 95% interval is Student's t interval of their mean log (ratios of
times are close to log-normal). An interval containing 1 is "no significant change".
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from intelliperf.contract.report import Speedup
from intelliperf.errors import ProfileError
from profiler.trace import run_traced

from .stats import t_quantile
from .timing import TimedLaunch, run_timed

__all__ = [
    "FLAG_ABOVE",
    "TIMERS",
    "KernelTimes",
    "RunSeen",
    "RunTimer",
    "Timer",
    "interleaved_speedup",
    "measure_speedup",
    "speedup_from_times",
    "warm_durations",
]

FLAG_ABOVE = 10.0
SIDES = ("reference", "candidate")
Timer = Literal["events", "cupti"]
TIMERS: tuple[Timer, ...] = ("events", "cupti")
_INSTRUMENT = {
    "events": "CUDA-event kernel time (an event pair around each launch)",
    "cupti": "CUPTI kernel time",
}
METHOD = (
    "{instrument} summed over all launches per run; reference and candidate runs interleaved "
    "(ABAB); median of per-pair ratios; 95% Student-t interval of the mean log ratio"
)


@dataclass(frozen=True)
class KernelTimes:
    """One side's runs: kernel time (ns, summed over launches) and application wall time per run."""

    kernel_ns: tuple[float, ...]
    wall_s: tuple[float, ...]
    launches: tuple[int, ...]


RunSeen = Callable[[str, Sequence[TimedLaunch]], None]
"""Told, after each timed run, its side ("reference" or "candidate") and its launches as recorded."""


def speedup_from_times(reference: KernelTimes, candidate: KernelTimes, timer: Timer = "events") -> Speedup:
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
        half = t_quantile(0.975, n - 1) * statistics.stdev(logs) / math.sqrt(n)
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
        method=METHOD.format(instrument=_INSTRUMENT[timer]),
    )


def _launch_times(
    timer: Timer,
    cmd: Sequence[str],
    *,
    pattern: re.Pattern[str],
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    timeout_s: float,
    library: str | Path | None,
) -> tuple[list[tuple[Hashable, float]], float, tuple[TimedLaunch, ...] | None]:
    """The target kernel's launches in one run of ``cmd`` as (which kernel, duration in ns), each kernel's
    launches in launch order, the run's wall time, and with the events timer the timed launches as
    recorded (what each asked for). A kernel is its mangled name, and with the events timer its process
    too (launch indices start again in every process)."""
    if timer == "events":
        timed = run_timed(
            cmd,
            kernel_regex=pattern.pattern,
            cwd=cwd,
            env=env,
            timeout_s=timeout_s,
            library=library,
            quiesce=True,
        )
        return [((x.process, x.name), x.duration_ns) for x in timed.launches], timed.wall_s, timed.launches
    traced = run_traced(cmd, cwd=cwd, env=env, timeout_s=timeout_s, library=library)
    matching = [x for x in traced.launches if pattern.search(x.name) or pattern.search(x.demangled)]
    return [(x.name, float(x.duration_ns)) for x in matching], traced.wall_s, None


def warm_durations(launches: Sequence[tuple[Hashable, float]], warmup: int) -> list[float]:
    """The durations of ``launches`` ((kernel, ns), each kernel's in launch order) without the first
    ``warmup`` launches of each kernel, unless that kernel ran no more than ``warmup`` times (then all of
    its launches stay).

    Why: a kernel's first launch in a process runs cold (instruction caches, TLBs, L2, a lazily loaded
    module): on an H100 it took 7-11 us longer than the launches after it, which in a 5-launch run of a
    32 us kernel moved the speedup by 7% against a warmed-up harness."""
    if warmup < 0:
        raise ValueError("warmup must not be negative")
    per_kernel: dict[Hashable, int] = {}
    for kernel, _ in launches:
        per_kernel[kernel] = per_kernel.get(kernel, 0) + 1
    seen: dict[Hashable, int] = {}
    kept = []
    for kernel, ns in launches:
        seen[kernel] = seen.get(kernel, 0) + 1
        if per_kernel[kernel] <= warmup or seen[kernel] > warmup:
            kept.append(ns)
    return kept


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
    timer: Timer = "events",
    warmup_launches: int = 1,
    seen: RunSeen | None = None,
) -> Speedup:
    """Run reference and candidate ``runs`` times each, alternating, timing the kernel with ``timer``; a
    run's kernel time is the sum over its launches but the first ``warmup_launches`` of each kernel
    (``warm_durations``). With ``min_runs``, stop early as ``interleaved_speedup`` says. ``seen`` is told
    each run's timed launches as recorded (events timer only: ``accordo.timed_launches`` reads them).

    Raises AppError if a run fails (the candidate passed its correctness check, so it should not) and
    ProfileError if a run launches the kernel a different number of times than the first run of its side.
    """
    if timer not in TIMERS:
        raise ValueError(f"unknown timer {timer!r}; one of: {', '.join(TIMERS)}")
    pattern = re.compile(kernel_regex)
    sides = {"reference": (reference, reference_cwd), "candidate": (candidate, candidate_cwd)}
    first_count: dict[str, int] = {}
    left_out: list[str] = []

    def time_run(side: str, i: int) -> tuple[float, float, int]:
        cmd, cwd = sides[side]
        launches, wall_s, recorded = _launch_times(
            timer, cmd, pattern=pattern, cwd=cwd, env=env, timeout_s=timeout_s, library=library
        )
        if seen is not None and recorded is not None:
            seen(side, recorded)
        if not launches:
            raise ProfileError(f"the {side}'s run {i + 1} launched no kernel matching {kernel_regex!r}")
        expected = first_count.setdefault(side, len(launches))
        if len(launches) != expected:
            raise ProfileError(
                f"the {side} launched the kernel {expected} times in its first timed run and "
                f"{len(launches)} times in run {i + 1}"
            )
        warm = warm_durations(launches, warmup_launches)
        if len(warm) < len(launches):
            left_out.append(side)
        return sum(warm), wall_s, len(launches)

    result = interleaved_speedup(time_run, runs=runs, min_runs=min_runs, progress=progress, timer=timer)
    notes = []
    if left_out:
        notes.append(f"the first {warmup_launches} launch(es) of each kernel per run left out as warm-up")
    if min_runs is not None and result.runs < runs:
        notes.append(f"stopped after {result.runs} pairs, the interval excluding 1")
    if notes:
        result = result.model_copy(update={"method": "; ".join([result.method, *notes])})
    return result


RunTimer = Callable[[str, int], tuple[float, float, int]]
"""Times run ``i`` (from 0) of one side, "reference" or "candidate": (kernel ns summed over the run's
launches, the run's wall seconds, launches)."""


def interleaved_speedup(
    time_run: RunTimer,
    *,
    runs: int,
    min_runs: int | None = None,
    progress: Callable[[str], None] | None = None,
    timer: Timer = "events",
) -> Speedup:
    """Reference and candidate runs alternating (A B A B ...), ``runs`` pairs, timed by ``time_run``.
    With ``min_runs``, stop after that many pairs or more as soon as the 95% interval excludes 1 (the
    optimization loop's budget: a clear speedup needs few runs, a doubtful one gets all of them)."""
    if runs < 2:
        raise ValueError("at least 2 runs per side are needed for an interval")
    times: dict[str, tuple[list[float], list[float], list[int]]] = {s: ([], [], []) for s in SIDES}
    result: Speedup | None = None
    for i in range(runs):
        for side in SIDES:
            kernel_ns, wall_s, launches = time_run(side, i)
            times[side][0].append(kernel_ns)
            times[side][1].append(wall_s)
            times[side][2].append(launches)
        if progress is not None:
            ratio = times["reference"][0][-1] / times["candidate"][0][-1]
            progress(f"timing run {i + 1}/{runs}: speedup {ratio:.3f}x")
        result = speedup_from_times(*(KernelTimes(*map(tuple, times[side])) for side in SIDES), timer)
        if min_runs is not None and i + 1 >= min_runs and result.significant:
            break
    assert result is not None
    return result

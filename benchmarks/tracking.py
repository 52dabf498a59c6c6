"""Continuous mode's first proof (CPU only): does change-point detection find the commit where a kernel's
time stepped, and stay quiet on histories that never moved?

Synthetic commit histories with known steps, whose levels and noise are real GPU timings recorded in this
repository (nothing here is an invented noise level):

* a history's kernel is one of the recorded kernels with at least ``MIN_LAUNCHES`` launches in a trace
  (``tests/fixtures/gpu/<example>/{original,fixed}/trace.jsonl``, Accordo's CUPTI tracer, H100/H200): its
  recorded median is the starting level, and its launches divided by that median are the launch-to-launch
  noise. A run's kernel time is the mean of ``launches`` launches drawn from them (1: a run times one
  launch, as Accordo's capture files do; 20: the fewest launches of a recorded run in the pool);
* between commits the machine drifts: each commit's runs share one factor exp(N(0, drift_sd)), drift_sd being
  the largest run-to-run spread recorded here: kernels that ran unchanged in both the original and the fixed
  program (separate processes, same launch configuration, not the example's target kernel),
  ``benchmarks/results/validate.json``'s repeated speedups (speedup_cv_max), and the 24 capture runs of one
  kernel in ``tests/fixtures/captures/sums/`` (``accordo.capture.read_capture``'s ``duration_ns``).

Each history has 100 commits and 3 runs per commit; change histories get 1-3 steps of +-5%..+-30% (and a
smaller set of +-1%..+-5%, reported but not a target) at random commits at least ``SPACING`` commits apart
and from either end; null histories have none. The detector runs with its defaults. A true step is found
when a detection of the same sign lies within ``TOLERANCE`` commits (one detection per step); exact when it
is at the step's commit. Detections matched to no step are false alarms.

    python -m benchmarks.tracking --out benchmarks/results/tracking.json [--seed N]

Targets: recall >= 0.95 for steps of 5% or more, exact commit for >= 90% of those found, <= 1 false alarm
per 100 commits of histories without a change.
"""

from __future__ import annotations

import argparse
import collections
import inspect
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from accordo.capture import read_capture
from intelliperf.tracking.changepoints import ChangePoint, CommitTimes, find_change_points

ROOT = Path(__file__).resolve().parents[1]
GPU_FIXTURES = ROOT / "tests" / "fixtures" / "gpu"
CAPTURE_RUNS = ROOT / "tests" / "fixtures" / "captures" / "sums"
VALIDATE = ROOT / "benchmarks" / "results" / "validate.json"
EXAMPLES = ROOT / "examples" / "examples.json"

MIN_LAUNCHES = 20
COMMITS = 100
RUNS = 3
LAUNCHES_PER_RUN = (1, 20)
SPACING = 5  # commits between two steps, and from a step to either end of the history
TOLERANCE = 5  # commits: a detection this close to a step (same sign) counts as finding it
BIG = (0.05, 0.30)
SMALL = (0.01, 0.05)
EFFECT_BINS = ((0.01, 0.02), (0.02, 0.05), (0.05, 0.10), (0.10, 0.20), (0.20, 0.30))
# examples whose fixed program runs an identical copy of the target kernel (examples/examples.json)
IDENTICAL_FIXES = {"clean_saxpy"}
TARGETS = {"recall": 0.95, "exact_commit_share": 0.90, "false_alarms_per_100_commits": 1.0}

Detector = Callable[[Sequence[CommitTimes]], list[ChangePoint]]


@dataclass(frozen=True)
class Kernel:
    file: str  # relative to the repository
    name: str
    median_ns: float
    relative: np.ndarray  # each launch's duration / the median

    def row(self) -> dict:
        rel = self.relative
        return {
            "file": self.file,
            "kernel": self.name,
            "launches": int(rel.size),
            "median_ns": self.median_ns,
            "cv": round(float(rel.std() / rel.mean()), 5),
            "max_over_median": round(float(rel.max()), 4),
        }


@dataclass(frozen=True)
class Sources:
    kernels: list[Kernel]
    drift_sd: float
    drift: dict  # how drift_sd was derived, with the files


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _trace_launches(path: Path) -> tuple[dict[str, list[int]], dict[str, set[str]]]:
    durations: dict[str, list[int]] = collections.defaultdict(list)
    configs: dict[str, set[str]] = collections.defaultdict(set)
    with path.open() as f:
        for line in f:
            record = json.loads(line)
            if "start" not in record or "end" not in record:
                continue
            durations[record["name"]].append(record["end"] - record["start"])
            config = [record.get(k) for k in ("grid", "block", "regs", "smem")]
            configs[record["name"]].add(json.dumps(config))
    return durations, configs


def _traces() -> list[Path]:
    return sorted(GPU_FIXTURES.glob("*/original/trace.jsonl")) + sorted(
        GPU_FIXTURES.glob("*/fixed/trace.jsonl")
    )


def load_sources() -> Sources:
    kernels = []
    for path in _traces():
        durations, _ = _trace_launches(path)
        for name, values in sorted(durations.items()):
            if len(values) >= MIN_LAUNCHES:
                d = np.asarray(values, dtype=float)
                median = float(np.median(d))
                kernels.append(Kernel(_rel(path), name, median, d / median))

    targets = {e["name"]: e["kernel"] for e in json.loads(EXAMPLES.read_text())}
    pairs = []
    for original in sorted(GPU_FIXTURES.glob("*/original/trace.jsonl")):
        example = original.parts[-3]
        fixed = original.parent.parent / "fixed" / "trace.jsonl"
        if not fixed.is_file():
            continue
        (d_o, c_o), (d_f, c_f) = _trace_launches(original), _trace_launches(fixed)
        for name in sorted(set(d_o) & set(d_f)):
            target = targets.get(example, "\0") in name and example not in IDENTICAL_FIXES
            if target or c_o[name] != c_f[name] or min(len(d_o[name]), len(d_f[name])) < MIN_LAUNCHES:
                continue
            ratio = math.log(float(np.median(d_f[name])) / float(np.median(d_o[name])))
            pairs.append({"example": example, "kernel": name, "log_ratio": round(ratio, 6)})
    # the difference of two recordings holds two drifts
    pairs_sd = math.sqrt(sum(p["log_ratio"] ** 2 for p in pairs) / len(pairs) / 2)

    validate = json.loads(VALIDATE.read_text())
    speedup_sd = float(validate["speedup_cv_max"]) / math.sqrt(
        2
    )  # a speedup is a ratio of two kernels' times

    capture_files = sorted(CAPTURE_RUNS.glob("reference-*.bin"), key=lambda p: int(p.stem.split("-")[1]))
    runs = [launch.duration_ns for f in capture_files for launch in read_capture(f).launches]
    runs = [r for r in runs if r]
    capture_sd = float(np.std(np.log(np.asarray(runs, dtype=float)), ddof=1))

    pairs_sd, speedup_sd, capture_sd = (round(x, 6) for x in (pairs_sd, speedup_sd, capture_sd))
    drift = {
        "sd": max(pairs_sd, speedup_sd, capture_sd),
        "rule": "the largest of the three estimates (SD of log time between runs of unchanged code)",
        "unchanged_kernels": {
            "sd": pairs_sd,
            "how": "sqrt(mean(log(median fixed / median original)^2) / 2) over kernels run unchanged in both "
            f"(same name and launch configuration, >= {MIN_LAUNCHES} launches each, not the example's target "
            f"kernel from {_rel(EXAMPLES)} unless its fix is an identical copy)",
            "files": sorted(
                {f"tests/fixtures/gpu/{p['example']}/{{original,fixed}}/trace.jsonl" for p in pairs}
            ),
            "pairs": pairs,
        },
        "validate_speedup_cv": {
            "sd": speedup_sd,
            "how": "speedup_cv_max / sqrt(2): the CV of 3 repeated Accordo speedups of each example pair",
            "file": _rel(VALIDATE),
            "speedup_cv_max": validate["speedup_cv_max"],
        },
        "capture_runs": {
            "sd": capture_sd,
            "how": "SD of log(duration_ns) of one launch in each of 24 runs (accordo.capture.read_capture)",
            "files": [_rel(f) for f in capture_files],
            "runs": len(runs),
        },
    }
    return Sources(kernels, drift["sd"], drift)


@dataclass(frozen=True)
class History:
    series: list[CommitTimes]
    steps: list[tuple[int, float]]  # (index of the first commit at the new level, relative change)
    kernel: str
    launches: int


def step_positions(rng: np.random.Generator, count: int, commits: int, spacing: int) -> list[int]:
    for _ in range(1000):
        positions = sorted(int(p) for p in rng.integers(spacing, commits - spacing + 1, size=count))
        if all(b - a >= spacing for a, b in itertools.pairwise(positions)):
            return positions
    raise ValueError(f"cannot place {count} steps {spacing} commits apart in {commits} commits")


def make_history(
    rng: np.random.Generator,
    kernel: Kernel,
    drift_sd: float,
    effects: Sequence[float],
    *,
    commits: int = COMMITS,
    runs: int = RUNS,
    launches: int = 1,
) -> History:
    positions = step_positions(rng, len(effects), commits, SPACING) if effects else []
    level = np.full(commits, kernel.median_ns)
    for position, effect in zip(positions, effects, strict=True):
        level[position:] *= 1 + effect
    series = []
    for c in range(commits):
        machine = level[c] * math.exp(rng.normal(0.0, drift_sd))
        draws = rng.choice(kernel.relative, size=(runs, launches))
        series.append(
            CommitTimes(commit=f"c{c:03d}", samples=[float(x) for x in machine * draws.mean(axis=1)])
        )
    return History(series, list(zip(positions, effects, strict=True)), kernel.name, launches)


def draw_effects(rng: np.random.Generator, span: tuple[float, float]) -> list[float]:
    count = int(rng.integers(1, 4))
    return [float(rng.uniform(*span) * rng.choice((-1.0, 1.0))) for _ in range(count)]


@dataclass
class Outcome:
    """One true step's fate."""

    effect: float
    launches: int
    found: bool
    exact: bool
    covered: bool | None  # the 95% interval holds the true change (exact finds only)


def match(steps: Sequence[tuple[int, float]], found: Sequence[ChangePoint]) -> tuple[list[Outcome], int]:
    """Nearest first, one detection per step, same sign: a slow-down reported as a speed-up found
    nothing. Returns each step's outcome (launches left 0) and the unmatched detections."""
    pairs = sorted(
        (abs(cp.index - index), s, d)
        for s, (index, effect) in enumerate(steps)
        for d, cp in enumerate(found)
        if abs(cp.index - index) <= TOLERANCE and (cp.change > 0) == (effect > 0)
    )
    taken_s: dict[int, int] = {}
    taken_d: set[int] = set()
    for _, s, d in pairs:
        if s not in taken_s and d not in taken_d:
            taken_s[s] = d
            taken_d.add(d)
    outcomes = []
    for s, (index, effect) in enumerate(steps):
        d = taken_s.get(s)
        cp = found[d] if d is not None else None
        exact = cp is not None and cp.index == index
        covered = (cp.low <= effect <= cp.high) if exact and cp is not None else None
        outcomes.append(Outcome(effect, 0, cp is not None, exact, covered))
    return outcomes, len(found) - len(taken_d)


def _share(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def summarize(outcomes: Sequence[Outcome]) -> dict:
    found = [o for o in outcomes if o.found]
    exact = [o for o in found if o.exact]
    judged = [o for o in exact if o.covered is not None]
    return {
        "steps": len(outcomes),
        "found": len(found),
        "exact": len(exact),
        "recall": _share(len(found), len(outcomes)),
        "recall_exact": _share(len(exact), len(outcomes)),
        "exact_commit_share": _share(len(exact), len(found)),
        "interval_coverage": _share(sum(1 for o in judged if o.covered), len(judged)),
    }


def run(
    seed: int,
    *,
    series: int = 200,
    commits: int = COMMITS,
    launches: Sequence[int] = LAUNCHES_PER_RUN,
    detector: Detector = find_change_points,
    sources: Sources | None = None,
) -> dict:
    """``series`` change histories (and as many null ones, and a third as many small-step ones) for each
    value of ``launches``; the figures of the given detector."""
    sources = sources or load_sources()
    rng = np.random.default_rng(seed)
    outcomes: list[Outcome] = []
    null = collections.Counter()
    spurious = collections.Counter()
    started = time.monotonic()
    for n_launches in launches:
        plan = [("big", BIG)] * series + [("small", SMALL)] * max(1, series // 3) + [("null", None)] * series
        for kind, span in plan:
            kernel = sources.kernels[int(rng.integers(len(sources.kernels)))]
            effects = draw_effects(rng, span) if span else []
            history = make_history(
                rng, kernel, sources.drift_sd, effects, commits=commits, launches=n_launches
            )
            found = detector(history.series)
            if kind == "null":
                null["series"] += 1
                null["commits"] += commits
                null["alarms"] += len(found)
                null["series_with_alarm"] += bool(found)
                null[f"alarms_{n_launches}"] += len(found)
                null[f"commits_{n_launches}"] += commits
                continue
            matched, extra = match(history.steps, found)
            for o in matched:
                o.launches = n_launches
            outcomes += matched
            spurious["alarms"] += extra
            spurious["commits"] += commits
    return report(
        seed, series, commits, launches, sources, outcomes, null, spurious, time.monotonic() - started
    )


def _per_100(alarms: int, commits: int) -> float | None:
    return round(100 * alarms / commits, 4) if commits else None


def report(
    seed: int,
    series: int,
    commits: int,
    launches: Sequence[int],
    sources: Sources,
    outcomes: Sequence[Outcome],
    null: collections.Counter,
    spurious: collections.Counter,
    seconds: float,
) -> dict:
    big = [o for o in outcomes if abs(o.effect) >= BIG[0]]
    headline = summarize(big)
    false_alarms = _per_100(null["alarms"], null["commits"])
    by_effect = []
    for lo, hi in EFFECT_BINS:
        row = summarize([o for o in outcomes if lo <= abs(o.effect) < hi or (hi == BIG[1] == abs(o.effect))])
        by_effect.append({"effect": f"{lo:.0%}-{hi:.0%}", **row})
    by_launches = {
        str(n): {
            **summarize([o for o in big if o.launches == n]),
            "false_alarms_per_100_commits": _per_100(null[f"alarms_{n}"], null[f"commits_{n}"]),
        }
        for n in launches
    }
    figures = {
        "recall": headline["recall"],
        "exact_commit_share": headline["exact_commit_share"],
        "false_alarms_per_100_commits": false_alarms,
    }
    met = {
        "recall": figures["recall"] is not None and figures["recall"] >= TARGETS["recall"],
        "exact_commit_share": figures["exact_commit_share"] is not None
        and figures["exact_commit_share"] >= TARGETS["exact_commit_share"],
        "false_alarms_per_100_commits": false_alarms is not None
        and false_alarms <= TARGETS["false_alarms_per_100_commits"],
    }
    return {
        "benchmark": "tracking",
        "seed": seed,
        "seconds": round(seconds, 1),
        **figures,
        "recall_exact": headline["recall_exact"],
        "interval_coverage": headline["interval_coverage"],
        "spurious_per_100_commits_with_changes": _per_100(spurious["alarms"], spurious["commits"]),
        "null_series_with_alarm": _share(null["series_with_alarm"], null["series"]),
        "targets": TARGETS,
        "met": met,
        "counts": {
            "steps_5pct_or_more": headline["steps"],
            "found": headline["found"],
            "exact": headline["exact"],
            "steps_under_5pct": len(outcomes) - len(big),
            "null_series": null["series"],
            "null_commits": null["commits"],
            "false_alarms": null["alarms"],
            "spurious_alarms_with_changes": spurious["alarms"],
        },
        "by_effect": by_effect,
        "by_launches_per_run": by_launches,
        "thresholds": {
            "detector": "intelliperf.tracking.changepoints.find_change_points (defaults)",
            **{
                name: parameter.default
                for name, parameter in inspect.signature(find_change_points).parameters.items()
                if parameter.kind is inspect.Parameter.KEYWORD_ONLY
            },
            "match_tolerance_commits": TOLERANCE,
            "recall_effect_at_least": BIG[0],
        },
        "design": {
            "commits": commits,
            "runs_per_commit": RUNS,
            "launches_per_run": list(launches),
            "change_series_per_launches": series,
            "small_step_series_per_launches": max(1, series // 3),
            "null_series_per_launches": series,
            "steps_per_series": [1, 3],
            "effects": {"targets": list(BIG), "small": list(SMALL), "sign": "random"},
            "spacing_commits": SPACING,
        },
        "sources": {
            "launch_noise": {
                "how": "a run's time = the mean of launches_per_run launches drawn (with replacement) from a "
                "recorded kernel's launch durations / their median, times the level; the level starts at "
                "the recorded median",
                "min_launches": MIN_LAUNCHES,
                "kernels": [k.row() for k in sources.kernels],
            },
            "drift": {
                "how": "each commit's runs share one factor exp(N(0, sd))",
                **sources.drift,
            },
        },
    }


def print_table(result: dict) -> None:
    print(f"{'effect':<10} {'steps':>6} {'recall':>7} {'exact':>7} {'exact/found':>12} {'CI cover':>9}")
    for row in result["by_effect"]:
        cells = [row["recall"], row["recall_exact"], row["exact_commit_share"], row["interval_coverage"]]
        text = [f"{c:.3f}" if c is not None else "-" for c in cells]
        print(f"{row['effect']:<10} {row['steps']:>6} {text[0]:>7} {text[1]:>7} {text[2]:>12} {text[3]:>9}")
    for n, row in result["by_launches_per_run"].items():
        print(
            f"launches/run {n:>3}: recall {row['recall']}, exact/found {row['exact_commit_share']}, "
            f"false alarms/100 commits {row['false_alarms_per_100_commits']}"
        )
    print(
        f"seed {result['seed']}: recall (>= 5%) {result['recall']}, "
        f"exact commit {result['exact_commit_share']}, "
        f"false alarms per 100 commits {result['false_alarms_per_100_commits']}, "
        f"drift sd {result['sources']['drift']['sd']:.4f}, targets met: {result['met']}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--series", type=int, default=200, help="change histories per launches-per-run value")
    args = parser.parse_args(argv)
    result = run(args.seed, series=args.series)
    print_table(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

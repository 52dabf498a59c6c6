"""Performance regressions in a kernel's per-commit timings, found by change-point detection.

A threshold ("alert when a commit is 5% slower than the one before") fails both ways on shared GPU
machines: set low, machine drift between two commits trips it; set high, a real 5% step hides in the noise
of a single commit. A change point is instead a claim about the whole history: that it is better explained
by two levels than by one. Many commits on each side of a split average the noise away, so a small step is
found once a few commits have landed after it, and the false-alarm rate is a number (``alpha`` per tested
segment) rather than a side effect of a threshold.

The method, in log(time) so that every effect is relative:

* the noise model (``estimate_noise``): the per-commit mean of log(time) varies by ``within² / runs``
  (run-to-run noise, from the repeated runs of each commit) plus ``between²`` (the machine's drift between
  commits, which no number of runs of one commit averages away; from the spread of successive differences
  of commit means, which a change point barely touches);
* circular binary segmentation on the commit means (Olshen et al. 2004): the stretch of commits whose
  weighted mean differs most from the rest of the segment (a t statistic; a stretch reaching an end is a
  plain step), kept when a permutation test of the segment (the maximum over every admissible stretch, as
  E-Divisive calibrates its statistic) says a single level rarely does as well; each piece is then
  searched the same way;
* refinement: each change point is moved to the best single split between its neighbours and re-tested
  there by permutation (that p-value is the reported confidence); those that no longer pass ``alpha``, or
  whose effect is under ``min_effect``, are dropped one by one. The 95% interval is the two levels'
  difference with the noise model's standard error (scaled up if the commits scatter more than it says).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from statistics import NormalDist

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["ChangePoint", "CommitTimes", "NoiseModel", "estimate_noise", "find_change_points"]

# The permutations are drawn from a fixed seed: a history must always give the same answer, or an alert
# could appear and vanish between two runs of the same job.
_SEED = 0x1A7E11
_MAD_TO_SD = 1.4826  # the MAD of a normal sample times this estimates its standard deviation
_MAD_EFFICIENCY = 0.37  # a MAD-based variance is worth about this share of the samples' degrees of freedom
_FLOOR_VAR = 1e-12  # identical timings everywhere: any difference is then real, but never divide by zero
_PERM_CELLS = 4_000_000  # permuted values held at once (memory), whatever the history's length


class CommitTimes(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    commit: str
    samples: list[float] = Field(
        description="Kernel time per run in ns, one or more (repeated runs of the same commit)"
    )
    code_hash: str | None = Field(
        default=None, description="A hash of the kernel's code at this commit, to tell code from machine"
    )

    @model_validator(mode="after")
    def _usable(self) -> CommitTimes:
        _check_samples(self.commit, self.samples)
        return self


class ChangePoint(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    index: int = Field(ge=1, description="Position of the first commit at the new level")
    commit: str = Field(description="That commit")
    before_ns: float = Field(gt=0, description="Level of the segment before (geometric mean)")
    after_ns: float = Field(gt=0, description="Level of the segment from this commit on (geometric mean)")
    change: float = Field(description="Relative: after/before - 1 (positive is slower)")
    low: float = Field(description="95% interval of the relative change, lower end")
    high: float = Field(description="95% interval of the relative change, upper end")
    confidence: float = Field(ge=0, le=1, description="1 - the permutation test's p-value")
    code_changed: bool | None = Field(
        description="Whether code_hash differs across the change (None if unknown)"
    )


class NoiseModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    within_sd: float = Field(ge=0, description="SD of log(time) between runs of one commit (0: no repeats)")
    between_sd: float = Field(ge=0, description="SD of a commit's mean log(time) beyond the runs' noise")
    commit_sd: list[float] = Field(description="Per commit: SD of its mean log(time)")
    df: float = Field(gt=0, description="Effective degrees of freedom of the estimate")


def _check_samples(commit: str, samples: Sequence[float]) -> None:
    """Times are logged, so zero, negative and non-finite values have no meaning and would poison the
    means silently (log(0) = -inf); refuse them with the commit's name, which is what a user can fix."""
    if len(samples) == 0:
        raise ValueError(f"commit {commit!r} has no samples: give at least one kernel time")
    for value in samples:
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise ValueError(f"commit {commit!r} has a non-finite time {value!r}")
        if value <= 0:
            raise ValueError(f"commit {commit!r} has a non-positive time {value!r}: times are in ns and > 0")


def _chi2_median_ratio(df: int) -> float:
    """median(χ²_df)/df (Wilson-Hilferty): scales a median of sample variances to the variance itself."""
    return (1 - 2 / (9 * df)) ** 3


def _logs(series: Sequence[CommitTimes]) -> list[np.ndarray]:
    for commit in series:  # a model_construct()ed CommitTimes skipped its validator
        _check_samples(commit.commit, commit.samples)
    return [np.log(np.asarray(commit.samples, dtype=float)) for commit in series]


def estimate_noise(series: Sequence[CommitTimes]) -> NoiseModel:
    """Why two parts: repeated runs of one commit only see run-to-run noise, while a shared machine also
    drifts between commits (clocks, neighbours, thermals), and that drift is what a naive per-commit
    comparison mistakes for a regression. Both are estimated robustly, because one run that shared the GPU
    with another job, or one real change point, must not inflate the noise of the whole history."""
    logs = _logs(series)
    if not logs:
        raise ValueError("the series is empty: give at least one commit")
    runs = np.array([len(x) for x in logs], dtype=float)
    means = np.array([x.mean() for x in logs])

    repeated = [(float(x.var(ddof=1)), len(x) - 1) for x in logs if len(x) >= 2]
    within_var = 0.0
    within_df = sum(df for _, df in repeated)
    if repeated:
        within_var = float(np.median([var / _chi2_median_ratio(df) for var, df in repeated]))
        if within_var == 0.0:  # quantized timer: most commits' runs tie; fall back to the plain pooled value
            within_var = sum(var * df for var, df in repeated) / within_df

    diffs = np.diff(means)
    between_var = 0.0
    if diffs.size:
        diff_var = (_MAD_TO_SD * float(np.median(np.abs(diffs - np.median(diffs))))) ** 2
        if diff_var == 0.0:
            diff_var = float(np.mean(diffs**2))
        # Var(m[c+1] - m[c]) = 2 between² + within² (1/runs[c] + 1/runs[c+1])
        run_term = within_var * float(np.mean(1 / runs[:-1] + 1 / runs[1:]))
        between_var = max(0.0, (diff_var - run_term) / 2)

    commit_var = np.maximum(between_var + within_var / runs, _FLOOR_VAR)
    df = max(1.0, _MAD_EFFICIENCY * diffs.size if diffs.size else float(within_df))
    return NoiseModel(
        within_sd=math.sqrt(within_var),
        between_sd=math.sqrt(between_var),
        commit_sd=[float(v) for v in np.sqrt(commit_var)],
        df=df,
    )


def _t_quantile(p: float, df: float) -> float:
    """Student's t quantile (Cornish-Fisher), without scipy: the interval's width must reflect that the
    noise was estimated from the history itself, which matters for short histories."""
    z = NormalDist().inv_cdf(p)
    df = max(df, 1.0)
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def _split_t(m: np.ndarray, w: np.ndarray, min_segment: int) -> np.ndarray:
    """|t| of every split leaving min_segment commits on each side, for each row of ``m``. Weighting by
    1/variance lets a commit with more runs count for more, and the t form makes splits near the ends
    (few commits on one side) pay for their uncertainty instead of winning on a lucky commit."""
    cw = np.cumsum(w, axis=-1)
    cs = np.cumsum(w * m, axis=-1)
    k = np.arange(min_segment, m.shape[-1] - min_segment + 1)
    wl, sl = cw[..., k - 1], cs[..., k - 1]
    wr, sr = cw[..., -1:] - wl, cs[..., -1:] - sl
    return np.abs(sr / wr - sl / wl) / np.sqrt(1 / wl + 1 / wr)


def _intervals(length: int, min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """Every [i, j) that could be a segment of its own: at least min_segment commits inside, and
    whatever is left on either side either nothing or at least min_segment commits."""
    i, j = np.triu_indices(length + 1, k=min_segment)
    keep = ((i == 0) | (i >= min_segment)) & ((j == length) | (length - j >= min_segment))
    keep &= ~((i == 0) & (j == length))
    return i[keep], j[keep]


class _Segmenter:
    def __init__(self, m: np.ndarray, w: np.ndarray, min_segment: int, alpha: float) -> None:
        self.m, self.w, self.min_segment, self.alpha = m, w, min_segment, alpha
        # alpha (n_perm + 1) a whole number: the Monte Carlo test then has level alpha exactly
        self.n_search = max(499, math.ceil(5 / alpha) - 1)
        self.n_local = max(999, math.ceil(10 / alpha) - 1)
        self._p: dict[tuple[int, int], float] = {}

    def _rows(self, lo: int, hi: int, kind: int, count: int) -> Iterator[np.ndarray]:
        """Permutations of the commits of [lo, hi), in blocks that bound the memory held at once."""
        rng = np.random.default_rng([_SEED, kind, lo, hi])
        block = max(1, _PERM_CELLS // ((hi - lo) ** 2 if kind == 0 else hi - lo))
        for start in range(0, count, block):
            yield np.argsort(rng.random((min(block, count - start), hi - lo)), axis=1)

    def segment(self, lo: int, hi: int) -> tuple[int, int] | None:
        """Circular binary segmentation's test (Olshen et al. 2004): is some stretch [i, j) of the segment
        at another level than the rest? A split into two alone misses a short bump (a regression fixed a
        few commits later): neither side's mean moves much. Returns the stretch, or None when a
        permutation test finds a single level explains the segment (at level alpha)."""
        m, w = self.m[lo:hi], self.w[lo:hi]
        i, j = _intervals(hi - lo, self.min_segment)
        if i.size == 0:
            return None
        total_w = w.sum()
        mc = m - (w * m).sum() / total_w  # a permutation keeps the totals, so center once

        def scores(order: np.ndarray | None) -> np.ndarray:
            mw, ww = (mc * w, w) if order is None else ((mc * w)[order], w[order])
            cs = np.concatenate([np.zeros((*ww.shape[:-1], 1)), np.cumsum(mw, axis=-1)], axis=-1)
            cw = np.concatenate([np.zeros((*ww.shape[:-1], 1)), np.cumsum(ww, axis=-1)], axis=-1)
            s_in, w_in = cs[..., j] - cs[..., i], cw[..., j] - cw[..., i]
            return s_in * s_in / (w_in * (total_w - w_in))  # t² of inside vs outside, times total_w

        observed = scores(None)
        best = int(np.argmax(observed))
        allowed = math.floor(self.alpha * (self.n_search + 1) + 1e-9) - 1  # exceedances still significant
        exceed = 0
        for order in self._rows(lo, hi, 0, self.n_search):
            exceed += int(np.count_nonzero(scores(order).max(axis=1) >= observed[best] * (1 - 1e-9)))
            if exceed > allowed:  # the full test could no longer reject: same decision, sooner
                return None
        return lo + int(i[best]), lo + int(j[best])

    def locate(self, lo: int, hi: int) -> tuple[int, float]:
        t = _split_t(self.m[lo:hi], self.w[lo:hi], self.min_segment)
        best = int(np.argmax(t))
        return lo + self.min_segment + best, float(t[best])

    def p_value(self, lo: int, hi: int) -> float:
        """Why a permutation test: the maximum of ~n correlated t statistics has no simple distribution,
        Bonferroni over-corrects, and launch timings have heavy tails (one launch sharing the GPU). Under
        no change the commits of a segment are exchangeable, so shuffling them gives the statistic's null
        distribution whatever the noise looks like, and a misestimated variance costs power, not validity."""
        if (lo, hi) not in self._p:
            _, t_obs = self.locate(lo, hi)
            m, w = self.m[lo:hi], self.w[lo:hi]
            exceed = 0
            for order in self._rows(lo, hi, 1, self.n_local):
                t_perm = _split_t(m[order], w[order], self.min_segment).max(axis=1)
                exceed += int(np.count_nonzero(t_perm >= t_obs * (1 - 1e-9)))
            self._p[(lo, hi)] = (1 + exceed) / (self.n_local + 1)
        return self._p[(lo, hi)]

    def effect(self, lo: int, k: int, hi: int) -> tuple[float, float, float]:
        """(before, after, se) of the weighted mean log time on each side of ``k``."""
        wl, wr = self.w[lo:k].sum(), self.w[k:hi].sum()
        before = float((self.w[lo:k] * self.m[lo:k]).sum() / wl)
        after = float((self.w[k:hi] * self.m[k:hi]).sum() / wr)
        return before, after, math.sqrt(1 / wl + 1 / wr)

    def dispersion(self, points: list[int]) -> float:
        """The noise model is robust (medians), which is right for weighing commits but too kind to a mean
        when the timings have heavy tails; an interval must use the spread the commits really have around
        their levels, so the standard errors are scaled by it (never down)."""
        edges = [0, *points, len(self.m)]
        chi2 = 0.0
        for lo, hi in itertools.pairwise(edges):
            w, m = self.w[lo:hi], self.m[lo:hi]
            chi2 += float((w * (m - (w * m).sum() / w.sum()) ** 2).sum())
        dof = len(self.m) - len(edges) + 1
        return max(1.0, chi2 / dof) if dof > 0 else 1.0


def _bounds(points: list[int], i: int, n: int) -> tuple[int, int]:
    return (points[i - 1] if i > 0 else 0), (points[i + 1] if i + 1 < len(points) else n)


def _refine(seg: _Segmenter, points: list[int], n: int) -> list[int]:
    """Segmentation places a change while other changes still share its segment, which can pull it a few
    commits off; between its final neighbours the split is a clean one-change problem."""
    points = sorted(points)
    for _ in range(50):
        moved = False
        for i in range(len(points)):
            lo, hi = _bounds(points, i, n)
            k, _ = seg.locate(lo, hi)
            if k != points[i]:
                points[i], moved = k, True
        if not moved:
            break
    return points


def find_change_points(
    series: Sequence[CommitTimes],
    *,
    min_effect: float = 0.0,
    alpha: float = 0.01,
    min_segment: int = 3,
) -> list[ChangePoint]:
    """Why these defaults: ``alpha`` = 0.01 bounds the chance that a history with no change gets any alert
    (each further segment tested after a real change spends at most the same), so about one history in a
    hundred that never moved raises an alarm, whatever its length. ``min_segment`` = 3 commits on each
    side: one slow commit is machine noise or a flaky run, not a level; it also means a change is reported
    once 3 commits have landed after it. ``min_effect`` = 0 reports every real change; raise it (e.g.
    0.03) to hear only about changes worth someone's time, since with many runs even a 0.5% change is real.

    The search costs O(n²) per permutation for n commits: a few hundred commits take well under a second,
    a thousand about ten; track a window of recent history rather than all of it. Two changes fewer than
    about 5 commits apart can merge into one: a piece of under ~11 commits has too few arrangements for
    its permutation test to reach p <= 0.01 (C(10, 5) = 252)."""
    if not (0 < alpha < 1):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not (math.isfinite(min_effect) and min_effect >= 0):
        raise ValueError(f"min_effect must be a finite relative change >= 0, got {min_effect!r}")
    if isinstance(min_segment, bool) or not isinstance(min_segment, int) or min_segment < 1:
        raise ValueError(f"min_segment must be an integer >= 1, got {min_segment!r}")
    series = list(series)
    if not series:
        return []
    noise = estimate_noise(series)
    n = len(series)
    if n < 2 * min_segment:
        return []

    means = np.array([x.mean() for x in _logs(series)])
    center = float(np.median(means))
    seg = _Segmenter(
        means - center,
        1 / np.square(np.asarray(noise.commit_sd)),
        min_segment,
        alpha,
    )

    points: list[int] = []
    stack = [(0, n)]
    while stack:
        lo, hi = stack.pop()
        stretch = seg.segment(lo, hi) if hi - lo >= 2 * min_segment else None
        if stretch is None:
            continue
        edges = sorted({lo, *stretch, hi})
        points += [e for e in stretch if lo < e < hi]
        stack += list(itertools.pairwise(edges))

    while True:
        points = _refine(seg, points, n)
        worst, worst_key = None, None
        for i, k in enumerate(points):
            lo, hi = _bounds(points, i, n)
            p = seg.p_value(lo, hi)
            before, after, _ = seg.effect(lo, k, hi)
            size = abs(math.expm1(after - before))
            # an insignificant change first (largest p), then the smallest too-small effect
            key = (1, p) if p > alpha else (0, -size) if size < min_effect else None
            if key is not None and (worst_key is None or key > worst_key):
                worst, worst_key = i, key
        if worst is None:
            break
        points.pop(worst)

    q = _t_quantile(0.975, noise.df)
    spread = math.sqrt(seg.dispersion(points))
    found = []
    for i, k in enumerate(points):
        lo, hi = _bounds(points, i, n)
        before, after, se = seg.effect(lo, k, hi)
        se *= spread
        delta = after - before
        left, right = series[k - 1].code_hash, series[k].code_hash
        found.append(
            ChangePoint(
                index=k,
                commit=series[k].commit,
                before_ns=math.exp(before + center),
                after_ns=math.exp(after + center),
                change=math.expm1(delta),
                low=math.expm1(delta - q * se),
                high=math.expm1(delta + q * se),
                confidence=1 - seg.p_value(lo, hi),
                code_changed=None if left is None or right is None else left != right,
            )
        )
    return found

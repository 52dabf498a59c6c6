"""The bound a float value must keep from the reference runs (accordo/compare.py's docstring gives the
formula), shared by the kernel-buffer comparison and the comparison of the files an application writes
(intelliperf/engine/output_files.py), so a value passes or fails alike whichever way it is captured.

Values come in as float64 arrays of one shape, the reference runs first to last. Where a run is not
finite, the element is judged against the first run with no noise allowance: a candidate must then be
within ``atol + rtol * |first|`` of a finite first value, or carry the same NaN or Inf as the first run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from .stats import t_two_sided_quantile

__all__ = ["FloatCheck", "ReferenceStats", "Tolerance", "check_floats", "noise_factor", "reference_stats"]


@dataclass(frozen=True)
class Tolerance:
    """What bounds one output's elements."""

    atol: float
    rtol: float
    rounding: float  # u * sqrt(N): relative allowance for another order of the same float operations
    noise_k: float  # k * sqrt(1 + 1/n): multiplies the reference runs' standard deviation

    def allowed(self, center: np.ndarray, std: np.ndarray) -> np.ndarray:
        return self.atol + (self.rtol + self.rounding) * np.abs(center) + self.noise_k * std


def noise_factor(alpha: float, noisy: int, runs: int) -> float:
    """``k * sqrt(1 + 1/n)``: k is Student's t two-sided quantile at ``alpha / noisy`` (Bonferroni over the
    ``noisy`` elements where the ``runs`` reference runs disagree) with ``runs - 1`` degrees of freedom;
    0 where no element is noisy or there is one run."""
    if not noisy or runs < 2:
        return 0.0
    return t_two_sided_quantile(alpha / noisy, runs - 1) * math.sqrt(1.0 + 1.0 / runs)


@dataclass(frozen=True)
class ReferenceStats:
    first: np.ndarray
    mean: np.ndarray  # the first run's value where some run is not finite
    std: np.ndarray  # sample standard deviation; 0 where some run is not finite


def reference_stats(runs: Iterable[np.ndarray]) -> ReferenceStats:
    """Mean and sample standard deviation of the reference runs, streamed over them (one run in memory at a
    time besides the sums). Sums of differences from the first run keep the variance exact where values
    are large and their spread tiny."""
    iterator = iter(runs)
    first = next(iterator)
    n = 1
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(first)
        s1 = np.zeros_like(first)
        s2 = np.zeros_like(first)
        for values in iterator:
            n += 1
            d = values - first
            finite &= np.isfinite(d)
            d = np.where(finite, d, 0.0)
            s1 += d
            s2 += d * d
        mean_d = s1 / n
        var = np.maximum(s2 - n * mean_d * mean_d, 0.0) / (n - 1) if n > 1 else np.zeros_like(first)
    mean = np.where(finite, first + mean_d, first)
    std = np.where(finite, np.sqrt(var), 0.0)
    return ReferenceStats(first=first, mean=mean, std=std)


@dataclass(frozen=True)
class FloatCheck:
    bad: np.ndarray  # out of bounds, or not finite where the first run is not the same NaN or Inf
    allowed: np.ndarray  # the allowed absolute difference per element
    abs_err: np.ndarray  # |candidate - mean|; 0 where either is not finite
    nan_inf: np.ndarray  # NaN or Inf that the first run does not share (or finite where it has one)


def check_floats(reference: ReferenceStats, candidate: np.ndarray, tolerance: Tolerance) -> FloatCheck:
    first, mean = reference.first, reference.mean
    with np.errstate(invalid="ignore", over="ignore"):
        allowed = tolerance.allowed(np.where(np.isfinite(mean), mean, 0.0), reference.std)
        finite = np.isfinite(mean) & np.isfinite(candidate)
        abs_err = np.where(finite, np.abs(candidate - mean), 0.0)
        same_special = (np.isnan(first) & np.isnan(candidate)) | (np.isinf(first) & (candidate == first))
        nan_inf = ~finite & ~same_special
    return FloatCheck(bad=(abs_err > allowed) | nan_inf, allowed=allowed, abs_err=abs_err, nan_inf=nan_inf)

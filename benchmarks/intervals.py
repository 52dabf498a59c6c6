"""How sure a median of a few runs is: the benchmarks that compare wall times of runs taken side by side."""

from __future__ import annotations

import math


def median_interval(values: list[float], level: float = 0.9) -> tuple[float, float] | None:
    """A distribution-free interval for the median of ``values`` (order statistics: the k-th smallest and
    largest, k the largest for which both tails of Binomial(n, 1/2) below k hold at most 1 - level); None
    when there are too few values for the level (fewer than 5 at 0.9). Six rounds give the whole range,
    eighteen the 6th to 13th value: what tells two conditions apart, or does not."""
    n = len(values)
    ordered = sorted(values)
    tail = 0.0
    k = 0
    while k < n // 2:
        tail += math.comb(n, k) / 2**n  # P(Binomial(n, 1/2) <= k)
        if 2 * tail > 1 - level:
            break
        k += 1
    if k == 0:
        return None
    return ordered[k - 1], ordered[n - k]

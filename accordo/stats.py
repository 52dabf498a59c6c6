"""Student's t distribution, for the speedup's confidence interval and the comparison's noise bound.

Only the standard library: the tail probability comes from the regularized incomplete beta function
(Lentz's continued fraction, as in Numerical Recipes' ``betacf``), and quantiles from bisection on it.
"""

from __future__ import annotations

import math

__all__ = ["t_quantile", "t_two_sided_quantile", "t_upper_tail"]

_EPS = 1e-15
_TINY = 1e-300


def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for numerator in (even, odd):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + numerator / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            return h
    return h


def _regularized_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_continued_fraction(a, b, x) / a
    return 1.0 - front * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_upper_tail(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    tail = 0.5 * _regularized_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (0 < p < 1)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be strictly between 0 and 1")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    upper = 1.0 - p
    low, high = 0.0, 1.0
    while t_upper_tail(high, df) > upper:
        high *= 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if t_upper_tail(mid, df) > upper:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * max(1.0, high):
            break
    return 0.5 * (low + high)


def t_two_sided_quantile(alpha: float, df: float) -> float:
    """The k with P(|T| > k) = ``alpha``."""
    return t_quantile(1.0 - alpha / 2.0, df)

"""benchmarks/intervals.py: the distribution-free interval for a median of a few paired runs, at its level's
edge."""

from __future__ import annotations

import random

from benchmarks.intervals import median_interval


def test_eighteen_rounds_give_the_sixth_to_the_thirteenth_value() -> None:
    values = [float(v) for v in range(1, 19)]
    random.Random(3).shuffle(values)
    assert median_interval(values) == (6.0, 13.0)


def test_six_rounds_give_the_whole_range_and_four_give_none() -> None:
    assert median_interval([5.0, -2.0, 9.0, 1.0, 3.0, 0.0]) == (-2.0, 9.0)
    assert median_interval([5.0, -2.0, 9.0, 1.0]) is None


def test_the_level_decides_at_its_edge() -> None:
    five = [4.0, 1.0, 3.0, 5.0, 2.0]  # both tails of the whole range: 2 / 32 = 0.0625
    assert median_interval(five, level=0.93) == (1.0, 5.0)
    assert median_interval(five, level=0.94) is None

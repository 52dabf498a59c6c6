"""A pull request's kernels against the base branch: moved only beyond the base history's own noise and
a minimum effect, against the level since the base's last change point; the comment's table."""

from __future__ import annotations

import numpy as np
import pytest

from intelliperf.summary import moves_table
from intelliperf.tracking.against_base import KernelMove, compare_to_base
from intelliperf.tracking.changepoints import CommitTimes


def history(levels: list[float], sd: float = 0.004, runs: int = 3, seed: int = 3) -> list[CommitTimes]:
    rng = np.random.default_rng(seed)
    return [
        CommitTimes(commit=f"c{i:02d}", samples=[float(v) for v in level * np.exp(rng.normal(0, sd, runs))])
        for i, level in enumerate(levels)
    ]


def head(level: float, seed: int = 9) -> CommitTimes:
    rng = np.random.default_rng(seed)
    return CommitTimes(commit="head", samples=[float(v) for v in level * np.exp(rng.normal(0, 0.004, 3))])


def test_a_slower_head_moved_with_an_interval_around_the_change() -> None:
    move = compare_to_base("k", history([1000.0] * 20), head(1200.0))
    assert move.moved and move.low < 0.2 < move.high and abs(move.change - 0.2) < 0.02
    assert move.base_commits == 20


def test_a_head_within_the_noise_did_not_move() -> None:
    assert not compare_to_base("k", history([1000.0] * 20), head(1002.0)).moved


def test_a_real_but_small_change_is_under_the_minimum_effect() -> None:
    small = compare_to_base("k", history([1000.0] * 20, sd=0.001), head(1020.0), min_effect=0.03)
    assert small.low > 0 and not small.moved
    assert compare_to_base("k", history([1000.0] * 20, sd=0.001), head(1020.0), min_effect=0.01).moved


def test_the_base_level_is_the_one_since_its_last_change_point() -> None:
    base = history([1000.0] * 12 + [1500.0] * 10)
    move = compare_to_base("k", base, head(1500.0))
    assert move.base_commits == 10 and not move.moved and abs(move.base_ns - 1500.0) < 10


def test_no_base_history_is_an_error() -> None:
    with pytest.raises(ValueError, match="no base-branch history"):
        compare_to_base("k", [], head(1.0))


def move(kernel: str, change: float, moved: bool = True) -> KernelMove:
    return KernelMove(
        kernel=kernel,
        base_ns=1000.0,
        head_ns=1000.0 * (1 + change),
        change=change,
        low=change - 0.01,
        high=change + 0.01,
        base_commits=10,
        moved=moved,
    )


def test_the_table_lists_moved_kernels_slowest_change_first() -> None:
    text = moves_table([move("a", -0.2), move("b`x", 0.3), move("c", 0.01, moved=False)], "http://d/k")
    lines = text.splitlines()
    assert lines[0] == "2 of 3 kernels moved beyond the noise against the base branch:"
    assert lines[4] == "| `bx` | 1 µs | 1.3 µs | +30.0% | +29.0% to +31.0% | slower |"
    assert lines[5] == "| `a` | 1 µs | 800 ns | -20.0% | -21.0% to -19.0% | faster |"
    assert text.endswith("[Each kernel's history on the dashboard](http://d/k)")
    assert moves_table([move("c", 0.01, moved=False)]) == (
        "No kernel's time moved beyond the noise against the base branch (1 compared)."
    )

"""intelliperf.tracking.changepoints: steps found at their commit with honest intervals, pure noise and
machine drift left alone at the documented rate, and bad timings refused."""

from __future__ import annotations

import math

import numpy as np
import pytest

from intelliperf.tracking.changepoints import (
    ChangePoint,
    CommitTimes,
    estimate_noise,
    find_change_points,
)

BASE_NS = 100_000.0


def history(
    seed: int,
    steps: dict[int, float] | None = None,
    *,
    commits: int = 60,
    runs: int = 3,
    within: float = 0.01,
    drift: float = 0.003,
    hashes: list[str | None] | None = None,
) -> list[CommitTimes]:
    """Log-normal run noise ``within`` and per-commit machine drift ``drift``; ``steps`` maps the first
    commit at a new level to the relative change."""
    rng = np.random.default_rng(seed)
    level = np.full(commits, BASE_NS)
    for index, change in (steps or {}).items():
        level[index:] *= 1 + change
    return [
        CommitTimes(
            commit=f"c{c}",
            samples=[float(x) for x in level[c] * np.exp(rng.normal(0, drift) + rng.normal(0, within, runs))],
            code_hash=hashes[c] if hashes else None,
        )
        for c in range(commits)
    ]


def test_a_clean_step_is_found_at_its_commit_with_an_interval_holding_the_true_change() -> None:
    found = find_change_points(history(1, {30: 0.08}))
    assert len(found) == 1
    cp = found[0]
    assert (cp.index, cp.commit) == (30, "c30")
    assert cp.low <= 0.08 <= cp.high and cp.low < cp.change < cp.high
    assert cp.high - cp.low < 0.03  # 30 commits a side pin it down
    assert cp.after_ns / cp.before_ns == pytest.approx(1 + cp.change)
    assert cp.before_ns == pytest.approx(BASE_NS, rel=0.01)
    assert cp.confidence >= 0.99


def test_a_speed_up_is_a_negative_change() -> None:
    (cp,) = find_change_points(history(2, {20: -0.10}))
    assert cp.index == 20 and cp.change < 0 and cp.low <= -0.10 <= cp.high


def test_pure_noise_raises_an_alarm_in_at_most_alpha_of_histories() -> None:
    # alpha = 0.01 bounds the share of histories without a change that get any alarm: 300 histories
    # expect at most 3; 8 or more would happen with probability < 0.5% if the bound held
    alarmed = sum(bool(find_change_points(history(1000 + seed, drift=0.0))) for seed in range(300))
    assert alarmed < 8


def test_machine_drift_between_commits_is_noise_not_a_regression() -> None:
    # runs of one commit agree to 0.1% but commits wander by 1%: a model of run noise alone would flag
    # most commits; the between-commit part of the noise model must absorb it
    series = [history(2000 + seed, within=0.001, drift=0.01) for seed in range(100)]
    assert sum(bool(find_change_points(s)) for s in series) < 5
    noise = estimate_noise(series[0])
    assert noise.between_sd == pytest.approx(0.01, rel=0.35)
    assert noise.within_sd == pytest.approx(0.001, rel=0.35)


def test_two_steps_are_both_found() -> None:
    found = find_change_points(history(3, {20: 0.06, 45: 0.12}, commits=70))
    assert [cp.index for cp in found] == [20, 45]
    assert [cp.low <= true <= cp.high for cp, true in zip(found, (0.06, 0.12), strict=True)] == [True, True]


def test_a_regression_fixed_a_few_commits_later_is_found_at_both_ends() -> None:
    # a short bump barely moves either half's mean: a plain split misses it, a stretch test does not
    found = find_change_points(history(4, {40: 0.15, 46: -0.15 / 1.15}, commits=100))
    assert [cp.index for cp in found] == [40, 46]
    assert found[0].change > 0 > found[1].change


def test_min_effect_drops_a_small_step_and_keeps_a_large_one() -> None:
    series = history(5, {20: 0.015, 40: 0.10}, within=0.002, drift=0.001)
    assert [cp.index for cp in find_change_points(series)] == [20, 40]
    kept = find_change_points(series, min_effect=0.03)
    assert [cp.index for cp in kept] == [40]
    # with the small step gone, the large one is measured against everything before it
    assert kept[0].before_ns == pytest.approx(BASE_NS * (1 + 0.015 * 20 / 40), rel=0.005)


def test_repeated_runs_reduce_the_noise_of_a_commit() -> None:
    one = estimate_noise(history(6, runs=1, commits=80, drift=0.0))
    six = estimate_noise(history(6, runs=6, commits=80, drift=0.0))
    assert six.within_sd == pytest.approx(0.01, rel=0.2)
    assert max(six.commit_sd) < 0.6 * min(one.commit_sd)  # sqrt(1/6) = 0.41
    assert one.within_sd == 0.0  # no commit repeated: all the noise is between commits


def test_more_runs_find_a_step_that_one_run_cannot() -> None:
    steps = {25: 0.02}
    assert find_change_points(history(7, steps, runs=1, within=0.03, drift=0.0, commits=50)) == []
    (cp,) = find_change_points(history(7, steps, runs=12, within=0.03, drift=0.0, commits=50))
    assert cp.index == 25


@pytest.mark.parametrize(
    ("hashes", "expected"),
    [
        (["a"] * 30 + ["b"] * 30, True),
        (["a"] * 60, False),
        ([None] * 60, None),
        (["a"] * 29 + [None] + ["b"] * 30, None),
    ],
)
def test_code_changed_says_whether_the_kernel_code_changed_at_the_step(hashes, expected) -> None:
    (cp,) = find_change_points(history(8, {30: 0.2}, hashes=hashes))
    assert cp.index == 30 and cp.code_changed is expected


def test_the_same_history_always_gives_the_same_answer() -> None:
    series = history(9, {15: 0.03, 35: -0.04}, within=0.02)
    assert find_change_points(series) == find_change_points(series)


def test_histories_too_short_to_split_and_identical_timings() -> None:
    assert find_change_points([]) == []
    assert find_change_points(history(10, commits=5)) == []
    flat = [CommitTimes(commit=f"c{i}", samples=[1000.0, 1000.0]) for i in range(20)]
    assert find_change_points(flat) == []
    stepped = flat[:10] + [CommitTimes(commit=f"d{i}", samples=[1100.0]) for i in range(10)]
    (cp,) = find_change_points(stepped)
    assert cp.index == 10 and cp.change == pytest.approx(0.1)
    assert estimate_noise(flat).commit_sd[0] > 0


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([], "no samples"),
        ([1.0, 0.0], "non-positive"),
        ([-5.0], "non-positive"),
        ([math.nan], "non-finite"),
        ([math.inf, 1.0], "non-finite"),
    ],
)
def test_bad_timings_are_refused_with_the_commit_named(samples, message) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        CommitTimes(commit="abc123", samples=samples)
    assert "abc123" in str(raised.value)
    sneaked = CommitTimes.model_construct(commit="abc123", samples=samples, code_hash=None)
    with pytest.raises(ValueError, match=message):
        find_change_points([*history(11, commits=10), sneaked])


@pytest.mark.parametrize(
    "kwargs",
    [{"alpha": 0.0}, {"alpha": 1.0}, {"min_effect": -0.1}, {"min_effect": math.nan}, {"min_segment": 0}],
)
def test_bad_settings_are_refused(kwargs) -> None:
    with pytest.raises(ValueError):
        find_change_points(history(12, commits=10), **kwargs)


def test_the_models_are_frozen_and_strict() -> None:
    (cp,) = find_change_points(history(13, {30: 0.2}))
    with pytest.raises(ValueError):
        cp.index = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        CommitTimes(commit="x", samples=[1.0], extra=1)  # type: ignore[call-arg]
    assert ChangePoint.model_validate(cp.model_dump()) == cp

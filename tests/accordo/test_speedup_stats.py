from __future__ import annotations

import math

import pytest

from accordo.speedup import KernelTimes, speedup_from_times
from accordo.stats import t_quantile, t_two_sided_quantile, t_upper_tail


def times(values: list[int]) -> KernelTimes:
    return KernelTimes(tuple(values), tuple(0.5 for _ in values), tuple(5 for _ in values))


def test_clear_speedup_is_significant() -> None:
    s = speedup_from_times(times([2000, 2010, 1990, 2005]), times([1000, 1000, 1001, 999]))
    assert s.verdict == "faster" and s.significant
    assert s.low < s.median < s.high and s.low > 1.95 and s.high < 2.05
    assert s.reference_ns == 2002.5 and s.candidate_ns == 1000.0 and s.runs == 4
    assert s.reference_wall_s == 0.5 and not s.flagged_for_review


def test_noise_around_one_is_no_significant_change() -> None:
    s = speedup_from_times(times([1000, 1030, 990, 1010, 1000]), times([1010, 1000, 1020, 995, 1001]))
    assert s.low < 1.0 < s.high
    assert s.verdict == "no significant change" and not s.significant


def test_slower_and_flagged() -> None:
    slower = speedup_from_times(times([1000, 1001, 999]), times([1500, 1490, 1510]))
    assert slower.verdict == "slower" and slower.high < 1.0
    suspicious = speedup_from_times(times([12000, 12100, 11900]), times([1000, 1001, 999]))
    assert suspicious.flagged_for_review and suspicious.verdict == "faster"


def test_interval_is_the_t_interval_of_log_ratios() -> None:
    ratios = [1.10, 1.20, 1.15]
    s = speedup_from_times(times([int(r * 10000) for r in ratios]), times([10000] * 3))
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    assert s.high == pytest.approx(math.exp(mean + 4.30265 * sd / math.sqrt(3)))
    assert s.median == pytest.approx(1.15)


def test_one_run_is_never_significant_and_bad_input_raises() -> None:
    one = speedup_from_times(times([3000]), times([1000]))
    assert one.median == 3.0 and not one.significant and one.verdict == "no significant change"
    with pytest.raises(ValueError):
        speedup_from_times(times([1000, 1000]), times([1000]))
    with pytest.raises(ValueError):
        speedup_from_times(times([0, 1000]), times([1000, 1000]))


def test_t_quantiles() -> None:
    """Against published tables of Student's t (two-sided 95%, 99%, 99.9%)."""
    table = {
        (0.975, 1): 12.706,
        (0.975, 9): 2.262,
        (0.975, 35): 2.030,
        (0.995, 15): 2.947,
        (0.9995, 23): 3.768,
    }
    for (p, df), expected in table.items():
        assert t_quantile(p, df) == pytest.approx(expected, abs=5e-4)
    assert t_quantile(0.975, 10**7) == pytest.approx(1.960, abs=5e-4)
    assert t_quantile(0.025, 9) == pytest.approx(-2.262, abs=5e-4)
    assert t_two_sided_quantile(0.001, 15) == pytest.approx(4.073, abs=5e-4)
    assert t_upper_tail(2.262, 9) == pytest.approx(0.025, abs=1e-5)
    assert t_upper_tail(-2.262, 9) == pytest.approx(0.975, abs=1e-5)
    for bad in (0.0, 1.0):
        with pytest.raises(ValueError):
            t_quantile(bad, 5)
    with pytest.raises(ValueError):
        t_upper_tail(1.0, 0)

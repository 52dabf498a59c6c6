from __future__ import annotations

import pytest

from benchmarks.counter_pass import per_kernel_cost


def test_the_fit_gives_the_cost_of_each_profiled_kernel_and_the_fixed_rest() -> None:
    rows = [{"profiled_kernels": k, "profile_s": 1.5 + 1.2 + 0.4 * k, "ncu_floor_s": 1.5} for k in (1, 2, 8)]
    fit = per_kernel_cost(rows)
    assert fit == {"seconds_per_kernel": pytest.approx(0.4), "fixed_seconds": pytest.approx(1.2)}
    assert per_kernel_cost(rows[:1]) is None

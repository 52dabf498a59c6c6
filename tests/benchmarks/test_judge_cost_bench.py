"""benchmarks/judge_cost.py on the CPU: steps timed from one progress message to the next, the last to the
end, and the profile's heaviest functions first."""

from __future__ import annotations

import cProfile
import time

from benchmarks.judge_cost import hot_functions, steps


def test_each_step_runs_until_the_next_message_and_the_last_until_the_end() -> None:
    events = [(0.0, "capturing"), (1.5, "probing"), (4.0, "replaying")]
    assert steps(events, 10.0) == [
        {"step": "capturing", "s": 1.5},
        {"step": "probing", "s": 2.5},
        {"step": "replaying", "s": 6.0},
    ]
    assert steps([], 3.0) == []


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_the_heaviest_function_comes_first() -> None:
    profile = cProfile.Profile()
    profile.enable()
    busy(0.2)
    sum(range(1000))
    profile.disable()
    hot = hot_functions(profile, top=3)
    assert len(hot) == 3 and hot[0]["function"].endswith("(busy)")
    assert hot[0]["own_s"] >= max(h["own_s"] for h in hot[1:])

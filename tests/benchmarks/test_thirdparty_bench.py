"""benchmarks/thirdparty.py on the CPU: the timing target's edges (3% of the plain run, 50 ms floor) and
the set's figures, where a failed program counts nowhere."""

from __future__ import annotations

import sys

import pytest

from benchmarks.thirdparty import (
    NOT_STARTED,
    command,
    rounds_for,
    summarize,
    with_earlier_rows,
    within_timing_target,
)


@pytest.mark.parametrize(
    ("plain_s", "timing_s", "within"),
    [
        (2.0, 2.06, True),  # exactly 3% over
        (2.0, 2.0601, False),
        (0.5, 0.55, True),  # 3% is 15 ms: the 50 ms floor holds
        (0.5, 0.5501, False),
        (0.5, 0.4, True),
    ],
)
def test_the_timing_target_is_3_percent_or_50_ms_whichever_is_larger(
    plain_s: float, timing_s: float, within: bool
) -> None:
    assert within_timing_target(plain_s, timing_s) is within


def test_the_figures_are_medians_and_maxima_of_the_measured_programs() -> None:
    rows = [
        {"name": "a", "plain_s": 1.0, "timing_s": 1.01, "counters_s": 2.0},
        {"name": "b", "plain_s": 2.0, "timing_s": 2.2, "counters_s": 24.0},
        {"name": "c", "plain_s": 1.0, "timing_s": 1.02, "counters_s": None},
        {"name": "d", "error": "make exited 2"},
    ]
    figures = summarize(rows)
    assert (figures["programs"], figures["measured"]) == (4, 3)
    assert figures["timing_overhead"] == pytest.approx(0.02) and figures["timing_overhead_max"] == 0.1
    assert figures["timing_within_target_everywhere"] is False  # b: 200 ms over 2 s
    assert (figures["counter_ratio_median"], figures["counter_ratio_max"]) == (7.0, 12.0)
    assert summarize([{"name": "d", "error": "x"}])["timing_overhead"] is None


def test_a_leading_python3_is_this_python() -> None:
    assert command(("python3", "bench.py", "-x")) == [sys.executable, "bench.py", "-x"]
    assert command(("./main", "100")) == ["./main", "100"]


def test_a_program_longer_than_5_s_gets_3_rounds_at_most() -> None:
    assert rounds_for(5.0, 5) == 5 and rounds_for(5.001, 5) == 3 and rounds_for(9.0, 2) == 2


def test_rows_from_an_earlier_run_keep_what_was_not_measured_now_in_manifest_order() -> None:
    earlier = {
        "device": "NVIDIA H200",
        "rows": [
            {"name": "nanogpt-compiled", "plain_s": 20.0},
            {"name": "hecbench-histogram", "plain_s": 0.6},
            {"name": "hecbench-sort", "plain_s": 3.0},
        ],
    }
    now = [
        {"name": "hecbench-sort", "plain_s": 1.0},
        {"name": "nanogpt-compiled", "error": NOT_STARTED},
        {"name": "hecbench-mandelbrot", "error": "make exited 2"},
    ]
    rows = with_earlier_rows([earlier], now)
    assert [(r["name"], r.get("plain_s")) for r in rows] == [
        ("hecbench-histogram", 0.6),
        ("hecbench-sort", 1.0),
        ("hecbench-mandelbrot", None),
        ("nanogpt-compiled", 20.0),
    ]


def test_a_program_not_started_now_and_never_measured_before_stays_a_row_with_its_error() -> None:
    rows = with_earlier_rows(
        [{"device": "NVIDIA H200", "rows": []}], [{"name": "hecbench-sort", "error": NOT_STARTED}]
    )
    assert rows == [{"name": "hecbench-sort", "error": NOT_STARTED}]

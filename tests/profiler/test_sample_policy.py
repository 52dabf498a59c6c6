"""The sampled trace's policy (profiler/native/sample_policy.h), compiled with the host's C++ compiler and
driven through scripted launch sequences (tests/profiler/sample_policy_check.cpp): which launches get a
record, which are counted without one, when kernel records are switched, and what a stream capture, a
second thread, a refused switch and a graph launch change. The native tracer runs this same code inside
CUPTI's launch callback (profiler/native/launch_sampler.cpp)."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

NATIVE = Path(__file__).resolve().parents[2] / "profiler" / "native"
CXX = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")


@cache
def scenarios(tmp: str) -> dict[str, dict]:
    binary = Path(tmp) / "sample_policy_check"
    subprocess.run(
        [CXX or "g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", f"-I{NATIVE}",
         str(Path(__file__).with_name("sample_policy_check.cpp")), "-o", str(binary)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    lines = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.splitlines()
    return {row["scenario"]: row for row in map(json.loads, lines)}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    return scenarios(str(tmp_path_factory.mktemp("policy")))


def test_kernellaunch_records_each_kernels_first_1000_and_every_64th_launch_after(
    run: dict[str, dict],
) -> None:
    """HeCBench kernelLaunch's shape: 72,000 launches of three kernels in turn."""
    row = run["kernellaunch"]
    per_kernel = 1000 + (24000 - 1000) // 64  # launches 1-1000, then 1064, 1128, ..., 23,976
    assert row["sampled"] == [per_kernel] * 3 and row["recorded"] == [0] * 3
    assert row["unrecorded"] == [24000 - per_kernel] * 3 and row["uncounted"] == [0] * 3
    # the three kernels reach each sampled number in the same turn: records go off at launch 1,001, then on
    # and off once for each of the 359 sampled turns
    assert row["switches"] == 1 + 2 * 359 and (row["recording"], row["open"]) == (False, 0)


def test_while_no_stream_capture_is_active_no_launch_asks_whether_it_is_captured(
    run: dict[str, dict],
) -> None:
    """The capture query is a driver call (cuStreamIsCapturing) on the launch's path: kernelLaunch asked it
    at every one of its 67,923 unrecorded launches. With no capture begun, it is never asked; beside an
    active capture (on another stream), every launch that could be captured asks, with the same fates."""
    alone, beside = run["kernellaunch"], run["kernellaunch_beside_a_capture"]
    assert alone["queries"] == 0
    fates = ("sampled", "recorded", "unrecorded", "uncounted", "switches")
    assert {k: beside[k] for k in fates} == {k: alone[k] for k in fates}
    assert beside["queries"] == sum(beside["unrecorded"]) + 359  # and each switch back on, at a sample


def test_a_program_within_the_first_launches_is_recorded_whole_without_a_switch(run: dict[str, dict]) -> None:
    row = run["few_launches"]
    assert row["sampled"] == [1000, 1000] and row["unrecorded"] == [0, 0]
    assert row["switches"] == 0 and row["recording"] is True


def test_every_other_launch_after_the_first(run: dict[str, dict]) -> None:
    """sample_first=1, sample_every=2 over five launches of two kernels in turn: launches 1, 3, 5 recorded."""
    row = run["every_other"]
    assert row["sampled"] == [3, 3] and row["unrecorded"] == [2, 2]


def test_inside_a_stream_capture_nothing_is_switched_or_counted(run: dict[str, dict]) -> None:
    row = run["capture"]
    assert row["sampled"] == [2] and row["unrecorded"] == [1] and row["uncounted"] == [3]
    assert row["switches"] == 1 and row["recording"] is False
    assert row["queries"] == 3  # launches 2, 5 and 6: the fourth came after the capture ended


def test_a_launch_made_while_another_threads_sample_is_in_flight_is_recorded_not_counted(
    run: dict[str, dict],
) -> None:
    row = run["two_threads"]
    assert row["sampled"] == [1, 1] and row["recorded"] == [0, 1] and row["unrecorded"] == [0, 1]
    assert row["switches"] == 1 and (row["recording"], row["open"]) == (False, 0)


def test_a_refused_switch_leaves_the_wanted_launch_counted_as_unrecorded(run: dict[str, dict]) -> None:
    row = run["refused_switch"]
    assert row["sampled"] == [1] and row["unrecorded"] == [2] and row["recording"] is False
    assert row["switches"] == 2


def test_a_graph_launch_holds_records_on_until_it_returns(run: dict[str, dict]) -> None:
    assert run["graph_held"]["held"] is True
    row = run["graph"]
    assert row["sampled"] == [1] and row["unrecorded"] == [2] and row["switches"] == 3

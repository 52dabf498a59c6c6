"""The timed_launches check without a GPU: what a candidate's timed launches asked for (the time file's grid,
block, shared memory and argument bytes) against a capture of the same program.

The recorded pair (tests/fixtures/gpu/timed_launches, H200) is examples/accordo_repeat/profiler_aware,
which launches its kernel on every row while it is captured and on one row in eight when timed, and the
honest warp-per-row rewrite; the edges are the recorded block_sum captures timed as they were captured,
then changed one thing at a time."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from accordo.capture import Capture, LaunchShape, read_capture
from accordo.timed_launches import timed_launches_check
from accordo.timing import LaunchRequest, TimedLaunch, read_timing

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "fixtures" / "gpu" / "timed_launches"
BLOCK_SUM = ROOT / "tests" / "fixtures" / "captures" / "block_sum"
SHAPE = LaunchShape(
    grid=(17, 1, 1),
    block=(256, 1, 1),
    dynamic_shared=0,
    stream=0,
    per_thread=False,
    graph_capture=False,
    persisting_l2=None,
    module=None,
)


def _captured() -> Capture:
    capture = read_capture(BLOCK_SUM / "reference-1.bin")
    return dataclasses.replace(
        capture, launches=tuple(dataclasses.replace(x, shape=SHAPE) for x in capture.launches)
    )


def _timed_as_captured(capture: Capture) -> list[TimedLaunch]:
    """The launches a timer would record for a run that did exactly what ``capture`` saw."""
    return [
        TimedLaunch(
            name=x.name,
            demangled=x.demangled,
            index=x.launch_index,
            duration_ns=1000.0,
            process=7,
            request=LaunchRequest(
                grid=SHAPE.grid, block=SHAPE.block, shared=0, args=tuple(p.raw for p in x.params)
            ),
        )
        for x in capture.launches
    ]


def _scalar_index(capture: Capture) -> int:
    return next(p.index for p in capture.launches[0].params if p.kind == "scalar")


def _changed(launch: TimedLaunch, **request: object) -> TimedLaunch:
    assert launch.request is not None
    return dataclasses.replace(launch, request=dataclasses.replace(launch.request, **request))


def _with_arg(launch: TimedLaunch, index: int, raw: bytes | None) -> TimedLaunch:
    assert launch.request is not None and launch.request.args is not None
    args = list(launch.request.args)
    args[index] = raw
    return _changed(launch, args=tuple(args))


def test_the_recorded_cheat_fails_and_the_honest_rewrite_passes() -> None:
    """profiler_aware passed rows = 256 to every captured launch and 32 to every timed one."""
    cheat = timed_launches_check(
        [read_capture(RECORDED / "profiler_aware.bin")], [read_timing(RECORDED / "profiler_aware.jsonl")]
    )
    assert cheat.outcome == "failed"
    assert cheat.detail is not None
    assert "10 launch(es) of _Z8row_normPKfPfii asked for other work when timed" in cheat.detail
    assert "parameter 2 was 0x20000000 = 32 timed, 0x00010000 = 256 captured" in cheat.detail
    honest = timed_launches_check(
        [read_capture(RECORDED / "warp.bin")], [read_timing(RECORDED / "warp.jsonl")]
    )
    assert (honest.outcome, honest.detail) == ("passed", None)


def test_the_recorded_time_file_says_what_each_launch_asked_for() -> None:
    timed = read_timing(RECORDED / "warp.jsonl")
    assert len(timed) == 10
    for launch in timed:
        assert launch.request is not None and launch.request.args is not None
        assert launch.request.block == (256, 1, 1) and launch.request.shared == 0
        assert [len(a or b"") for a in launch.request.args] == [8, 8, 4, 4]
        assert launch.request.args[2] == (256).to_bytes(4, "little")
        assert launch.request.args[3] == (64).to_bytes(4, "little")


def test_runs_that_did_what_was_captured_pass_whatever_their_pointers() -> None:
    capture = _captured()
    timed = _timed_as_captured(capture)
    pointer = next(p.index for p in capture.launches[0].params if p.kind == "pointer")
    moved = [_with_arg(x, pointer, (0xDEAD0000).to_bytes(8, "little")) for x in timed]
    check = timed_launches_check([capture, capture], [timed, list(reversed(moved))])
    assert (check.name, check.outcome, check.detail) == ("timed_launches", "passed", None)


@pytest.mark.parametrize("captures", [1, 2])
def test_one_other_value_fails_and_says_which_parameter(captures: int) -> None:
    capture = _captured()
    timed = _timed_as_captured(capture)
    index = _scalar_index(capture)
    timed[3] = _with_arg(timed[3], index, (12).to_bytes(4, "little"))
    check = timed_launches_check([capture] * captures, [timed, timed])
    assert check.outcome == "failed" and check.detail is not None
    assert check.detail.startswith("timed run 1 did other work than the captured run")
    assert f"parameter {index} was 0x0c000000 = 12 timed" in check.detail


def test_fewer_launches_another_grid_or_more_shared_memory_fail() -> None:
    capture = _captured()
    name = capture.launches[0].name
    fewer = _timed_as_captured(capture)[:-1]
    check = timed_launches_check([capture], [fewer])
    assert check.outcome == "failed" and check.detail is not None
    said = f"{name} was launched {len(fewer)} time(s) when timed and {len(fewer) + 1} when captured"
    assert said in check.detail
    for change, said in (
        ({"grid": (8, 1, 1)}, "grid (8, 1, 1) timed, (17, 1, 1) captured"),
        ({"block": (128, 1, 1)}, "block (128, 1, 1) timed, (256, 1, 1) captured"),
        ({"shared": 4096}, "dynamic shared memory 4096 timed, 0 captured"),
    ):
        timed = _timed_as_captured(capture)
        timed[0] = _changed(timed[0], **change)
        check = timed_launches_check([capture], [timed])
        assert check.outcome == "failed" and check.detail is not None and said in check.detail, change


def _seeded(capture: Capture, seed: int) -> list[TimedLaunch]:
    index = _scalar_index(capture)
    return [_with_arg(x, index, seed.to_bytes(4, "little")) for x in _timed_as_captured(capture)]


def test_with_one_capture_values_that_vary_between_timed_runs_are_not_compared() -> None:
    """A seed taken from the clock: its value differs in every run, captured or timed."""
    capture = _captured()
    runs = [_seeded(capture, 11), _seeded(capture, 12)]
    check = timed_launches_check([capture], runs)
    assert (check.outcome, check.detail) == (
        "passed",
        "1 argument(s) that differ from run to run not compared",
    )
    runs[1][0] = _changed(runs[1][0], grid=(1, 1, 1))
    assert timed_launches_check([capture], runs).outcome == "failed"  # shapes and counts still are


def test_with_two_captures_that_agree_a_value_varied_only_when_timed_fails() -> None:
    """A cheat that passes a different wrong value in each timed run is not excused as a varying seed: both
    captures saw the same values."""
    capture = _captured()
    check = timed_launches_check([capture, capture], [_seeded(capture, 11), _seeded(capture, 12)])
    assert check.outcome == "failed" and check.detail is not None and "= 11 timed" in check.detail


def test_with_two_captures_that_disagree_the_value_is_not_compared() -> None:
    capture = _captured()
    index = _scalar_index(capture)
    other = dataclasses.replace(
        capture,
        launches=tuple(
            dataclasses.replace(
                x,
                params=tuple(
                    dataclasses.replace(p, raw=(99).to_bytes(4, "little")) if p.index == index else p
                    for p in x.params
                ),
            )
            for x in capture.launches
        ),
    )
    check = timed_launches_check([capture, other], [_seeded(capture, 11)])
    assert (check.outcome, check.detail) == (
        "passed",
        "1 argument(s) that differ from run to run not compared",
    )


def test_an_argument_the_timer_could_not_read_is_not_compared() -> None:
    capture = _captured()
    timed = _timed_as_captured(capture)
    timed[0] = _with_arg(timed[0], _scalar_index(capture), None)
    check = timed_launches_check([capture, capture], [timed])
    assert (check.outcome, check.detail) == ("passed", "1 argument(s) the timer could not read not compared")
    timed[1] = _changed(timed[1], args=None)
    assert timed_launches_check([capture, capture], [timed]).outcome == "passed"


@pytest.mark.parametrize("what", ["older time file", "older capture", "no timed run", "no capture"])
def test_it_is_skipped_when_either_side_cannot_say(what: str) -> None:
    capture = _captured()
    captures, runs = [capture], [_timed_as_captured(capture)]
    if what == "older time file":
        runs = [[dataclasses.replace(x, request=None) for x in runs[0]]]
    elif what == "older capture":
        captures = [read_capture(BLOCK_SUM / "reference-1.bin")]
    elif what == "no timed run":
        runs = []
    else:
        captures = []
    check = timed_launches_check(captures, runs)
    assert check.outcome == "skipped" and check.detail

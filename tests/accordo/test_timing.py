"""The native profiler's time mode from Python: reading the time files recorded on an H100 (reduction_bank and
its fix, 5 launches each, tests/fixtures/gpu/time), leaving warm-up launches out, and refusing bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accordo.speedup import KernelTimes, measure_speedup, speedup_from_times, warm_durations
from accordo.timing import LaunchRequest, read_timing
from accordo.validate import ValidationOptions
from intelliperf.errors import ProfileError

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "gpu" / "time"
BLOCK_REDUCE = "_Z12block_reducePKfPfi"


def launches(name: str) -> list[tuple[str, float]]:
    return [(x.name, x.duration_ns) for x in read_timing(RECORDED / name)]


def test_reads_the_recorded_time_files() -> None:
    timed = read_timing(RECORDED / "time_reduction.jsonl")
    assert [x.index for x in timed] == [0, 1, 2, 3, 4]
    assert {x.name for x in timed} == {BLOCK_REDUCE}
    assert {x.demangled for x in timed} == {"block_reduce(float const*, float*, int)"}
    assert all(95_000 < x.duration_ns < 130_000 for x in timed)


def test_launches_keep_their_process_and_are_ordered_by_index_per_kernel(tmp_path: Path) -> None:
    """A multi-threaded program may finish launches out of order; each kernel's come back in launch order,
    the kernels in the order first seen, each tagged with its process (indices restart in every one)."""
    assert {x.process for x in read_timing(RECORDED / "time_reduction.jsonl")} == {1967}
    other = {**GOOD, "name": "_Z5otherv", "demangled": "other()"}
    path = write(tmp_path / "t.jsonl", [{**GOOD, "index": 1}, other, GOOD, {**other, "index": 1}])
    assert [(x.name, x.index) for x in read_timing(path)] == [
        (BLOCK_REDUCE, 0), (BLOCK_REDUCE, 1), ("_Z5otherv", 0), ("_Z5otherv", 1)
    ]  # fmt: skip


def test_each_process_leaves_out_its_own_cold_launch() -> None:
    runs = [((1, "k"), 9.0), ((1, "k"), 1.0), ((2, "k"), 8.0), ((2, "k"), 2.0), ((1, "k"), 1.5)]
    assert warm_durations(runs, 1) == [1.0, 2.0, 1.5]


def test_the_first_launch_runs_cold_and_is_left_out() -> None:
    """In the recording, launch 0 of each program took 6-7 us longer than the others; left in, it would
    shift a 5-launch speedup by several percent."""
    for name in ("time_reduction.jsonl", "time_reduction_fixed.jsonl"):
        durations = [ns for _, ns in launches(name)]
        assert durations[0] > max(durations[1:]) + 5_000
        assert warm_durations(launches(name), 1) == durations[1:]
        assert warm_durations(launches(name), 0) == durations
    reference = sum(warm_durations(launches("time_reduction.jsonl"), 1))
    candidate = sum(warm_durations(launches("time_reduction_fixed.jsonl"), 1))
    assert reference / candidate == pytest.approx(1.29, abs=0.01)  # the harness measured 1.287 on the H100


def test_warm_up_is_per_kernel_and_keeps_kernels_that_ran_too_rarely() -> None:
    runs = [("a", 10.0), ("b", 100.0), ("a", 2.0), ("a", 3.0), ("c", 7.0)]
    assert warm_durations(runs, 1) == [100.0, 2.0, 3.0, 7.0]  # b and c ran once: kept, in launch order
    assert warm_durations(runs, 2) == [100.0, 3.0, 7.0]
    with pytest.raises(ValueError, match="negative"):
        warm_durations(runs, -1)


def test_the_speedup_method_names_the_timer() -> None:
    times = KernelTimes(kernel_ns=(2000.0, 2010.0), wall_s=(1.0, 1.0), launches=(5, 5))
    half = KernelTimes(kernel_ns=(1000.0, 1005.0), wall_s=(1.0, 1.0), launches=(5, 5))
    assert speedup_from_times(times, half).method.startswith("CUDA-event kernel time")
    assert speedup_from_times(times, half, "cupti").method.startswith("CUPTI kernel time")


def test_unknown_timer_and_negative_warm_up_are_refused_before_running() -> None:
    with pytest.raises(ValueError, match="unknown timer 'wallclock'"):
        measure_speedup(["/nonexistent"], ["/nonexistent"], kernel_regex="k", runs=2, timeout_s=1,
                        timer="wallclock")  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(ValueError, match="unknown timer"):
        ValidationOptions(timer="wallclock")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="warmup_launches"):
        ValidationOptions(warmup_launches=-1)


def write(path: Path, lines: list[object], header: object | None = None) -> Path:
    header = header if header is not None else {"accordo": "time", "version": 1, "pid": 7}
    path.write_text("\n".join(json.dumps(x) for x in [header, *lines]) + "\n")
    return path


GOOD = {"name": BLOCK_REDUCE, "demangled": "block_reduce(float const*, float*, int)", "index": 0, "ns": 1.5e3}
REQUEST = {"grid": [17, 1, 1], "block": [256, 1, 1], "shared": 0, "args": ["00a0", None, "0d100000"]}


def test_a_launchs_request_is_read_and_an_older_line_has_none(tmp_path: Path) -> None:
    older, newer = read_timing(write(tmp_path / "t.jsonl", [GOOD, {**GOOD, **REQUEST, "index": 1}]))
    assert older.request is None
    assert newer.request == LaunchRequest(
        (17, 1, 1), (256, 1, 1), 0, (b"\x00\xa0", None, b"\x0d\x10\x00\x00")
    )
    unknown = read_timing(write(tmp_path / "u.jsonl", [{**GOOD, **REQUEST, "args": None}]))
    assert unknown[0].request is not None and unknown[0].request.args is None


@pytest.mark.parametrize(
    ("lines", "header", "message"),
    [
        ([{**GOOD, "index": 1, "error": "the launch is being captured into a CUDA graph; not timed"}], None,
         r"launch 1 of block_reduce\(float const\*, float\*, int\) could not be timed: the launch is being "
         r"captured into a CUDA graph"),
        ([{**GOOD, "ns": 0}], None, "'ns' is missing or not a positive number"),
        ([{**GOOD, "ns": "fast"}], None, "'ns' is missing or not a positive number"),
        ([{**GOOD, "index": True}], None, "'index' is missing"),
        ([{**GOOD, "name": None}], None, "'name' or 'demangled' is missing"),
        ([[1, 2]], None, "expected a JSON object"),
        ([GOOD], {"accordo": "trace", "version": 1}, "is not a profiler time file"),
        ([GOOD], {"accordo": "time", "version": 1}, "the header has no integer 'pid'"),
        ([{"error": "kernel='(' is not a valid regex"}], None,
         r"the profiler could not time the run: kernel='\('"),
        ([GOOD], {"accordo": "time", "version": 2}, "of version 2; this reader knows 1"),
        ([{**GOOD, **REQUEST, "grid": [1, 1]}], None, "'grid' is not three non-negative integers"),
        ([{**GOOD, **REQUEST, "block": [1, -1, 1]}], None, "'block' is not three non-negative integers"),
        ([{**GOOD, **REQUEST, "shared": True}], None, "'shared' is not a non-negative integer"),
        ([{**GOOD, **REQUEST, "args": "00ff"}], None, "'args' is not a list or null"),
        ([{**GOOD, **REQUEST, "args": ["0g"]}], None, "'args' holds something other than hex strings"),
        ([{**GOOD, **REQUEST, "args": [7]}], None, "'args' holds something other than hex strings"),
        ([{**GOOD, "grid": [1, 1, 1], "block": [1, 1, 1], "shared": 0}], None, "'args' is missing"),
    ],
)  # fmt: skip
def test_bad_time_files_are_refused(
    tmp_path: Path, lines: list[object], header: object | None, message: str
) -> None:
    with pytest.raises(ProfileError, match=message):
        read_timing(write(tmp_path / "time.jsonl", lines, header))


def test_truncated_and_missing_files_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "time.jsonl", [GOOD])
    path.write_text(path.read_text()[:-5])
    with pytest.raises(ProfileError, match="truncated"):
        read_timing(path)
    with pytest.raises(ProfileError, match="does not exist"):
        read_timing(tmp_path / "none.jsonl")

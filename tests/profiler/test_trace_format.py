"""The trace readers on hand-written traces (format: profiler/native/FORMAT.md): read_trace and summarize on
recordings (JSON Lines, version 1), read_native_trace and summarize_tables on the native tracer's kernel table
and binary launch records (version 2)."""

from __future__ import annotations

import json
import re
import struct
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from intelliperf.contract.profile import kept_launch_durations, stats_of
from intelliperf.contract.report import LAUNCH_DURATIONS_KEPT
from intelliperf.errors import ProfileError
from profiler.trace import (
    LAUNCH_RECORD,
    KernelLaunch,
    read_native_trace,
    read_trace,
    summarize,
    summarize_tables,
)

HEADER = {"accordo": "trace", "version": 1, "pid": 42}


def record(corr: int, name: str, start: int, end: int, **over: object) -> dict[str, object]:
    rec: dict[str, object] = {
        "corr": corr,
        "name": name,
        "demangled": name + "()",
        "start": start,
        "end": end,
        "grid": [8, 1, 1],
        "block": [128, 1, 1],
        "smem": 0,
        "regs": 16,
        "device": 0,
        "stream": 7,
    }
    rec.update(over)
    return rec


def write_trace(path: Path, records: list[dict[str, object]], header: object = HEADER) -> Path:
    lines = [json.dumps(header)] + [json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_reads_launches_sorted_by_start(tmp_path: Path) -> None:
    path = write_trace(
        tmp_path / "t.jsonl",
        [record(2, "b", 300, 350), record(1, "a", 100, 250, grid=[4, 2, 1], smem=528, regs=40)],
    )
    launches = read_trace(path)
    assert [x.corr for x in launches] == [1, 2]
    first = launches[0]
    assert first == KernelLaunch(1, "a", "a()", 100, 250, (4, 2, 1), (128, 1, 1), 528, 40, 0, 7)
    assert first.duration_ns == 150


def test_names_with_json_escapes(tmp_path: Path) -> None:
    name = 'void k<float, "q">(float const*, int&) \\ \u00e9'
    path = write_trace(tmp_path / "t.jsonl", [record(1, "_Z1k", 0, 10, demangled=name)])
    assert read_trace(path)[0].demangled == name


def test_zero_launches(tmp_path: Path) -> None:
    assert read_trace(write_trace(tmp_path / "t.jsonl", [])) == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"\x00\xff garbage \x13\n", "not a profiler trace"),
        (b'{"accordo":"capture","version":1}\n', "not a profiler trace"),
        (b'{"accordo":"trace","version":2,"pid":1}\n', "version 2"),
        (b'{"accordo":"trace","version":1,"pid":1}\n{"corr":1,"na', "truncated"),
        (b'{"accordo":"trace","version":1,"pid":1}\n{"corr":1}\n', "'name'"),
        (b'{"accordo":"trace","version":1,"pid":1}\nnot json\n', "malformed"),
        (b'{"accordo":"trace","version":1,"pid":1}\n[1,2]\n', "JSON object"),
    ],
)
def test_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(content)
    with pytest.raises(ProfileError, match=message):
        read_trace(path)


def test_bad_field_types(tmp_path: Path) -> None:
    path = write_trace(tmp_path / "t.jsonl", [record(1, "a", 0, 1, grid=[1, 2])])
    with pytest.raises(ProfileError, match=r"t\.jsonl:2.*grid"):
        read_trace(path)
    path = write_trace(tmp_path / "t.jsonl", [record(1, "a", 5, 1)])
    with pytest.raises(ProfileError, match="before start"):
        read_trace(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        read_trace(tmp_path / "nope.jsonl")


def test_summarize_ranks_by_total_and_computes_median() -> None:
    def launch(corr: int, name: str, duration: int) -> KernelLaunch:
        return KernelLaunch(
            corr, name, name + "!", 1000 * corr, 1000 * corr + duration, (1, 1, 1), (1, 1, 1), 0, 0, 0, 0
        )

    launches = [
        launch(1, "small", 10),
        launch(2, "big", 100),
        launch(3, "small", 30),
        launch(4, "many", 20),
        launch(5, "small", 20),
        launch(6, "many", 20),
        launch(7, "many", 20),
        launch(8, "many", 50),
        launch(9, "small", 1),
    ]
    stats = summarize(launches)
    assert [s.name for s in stats] == ["many", "big", "small"]
    many, big, small = stats
    assert (many.launches, many.total_ns, many.min_ns, many.max_ns) == (4, 110, 20, 50)
    assert many.mean_ns == pytest.approx(27.5)
    assert many.median_ns == 20.0  # even count: mean of the middle two (20, 20)
    assert big.median_ns == 100.0 and big.demangled == "big!"
    assert (small.launches, small.total_ns) == (4, 61)
    assert small.median_ns == 15.0  # sorted 1, 10, 20, 30
    assert summarize([]) == []


def test_summarize_tie_breaks_by_name() -> None:
    a = KernelLaunch(1, "b", "b", 0, 5, (1, 1, 1), (1, 1, 1), 0, 0, 0, 0)
    b = KernelLaunch(2, "a", "a", 0, 5, (1, 1, 1), (1, 1, 1), 0, 0, 0, 0)
    assert [s.name for s in summarize([a, b])] == ["a", "b"]


# ----------------------------------------------------------------------------------------------------------
# The native tracer's kernel table and binary launch records (version 2)

NATIVE_HEADER = {"accordo": "trace", "version": 2, "pid": 42, "record_bytes": 64}


def native_trace(
    path: Path,
    kernels: list[str],
    launches: list[tuple[int, int, int, int]],
    *,
    count: int | None = None,
    header: dict[str, object] = NATIVE_HEADER,
    codes: object = None,
    unrecorded: object = None,
) -> Path:
    """A kernel table of ``kernels`` and records (kernel id, corr, start, end), as the native profiler writes
    them."""
    lines = [json.dumps(header)]
    lines += [json.dumps({"kernel": i, "name": n, "demangled": n + "()"}) for i, n in enumerate(kernels)]
    closing: dict[str, object] = {"launches": len(launches) if count is None else count}
    if codes is not None:
        closing["code"] = codes
    if unrecorded is not None:
        closing["unrecorded"] = unrecorded
    lines.append(json.dumps(closing))
    path.write_text("\n".join(lines) + "\n")
    records = np.zeros(len(launches), dtype=LAUNCH_RECORD)
    for i, (kernel, corr, start, end) in enumerate(launches):
        records[i] = (kernel, corr, start, end, (8, 2, 1), (128, 1, 1), 528, 40, 0, 7)
    Path(f"{path}.launches").write_bytes(records.tobytes())
    return path


def test_a_launch_record_is_64_little_endian_bytes_at_the_documented_offsets(tmp_path: Path) -> None:
    path = native_trace(tmp_path / "t.jsonl", ["a"], [(0, 7, 1000, 1500)])
    raw = Path(f"{path}.launches").read_bytes()
    assert len(raw) == 64
    assert struct.unpack_from("<IIQQ3i3iiIII", raw) == (0, 7, 1000, 1500, 8, 2, 1, 128, 1, 1, 528, 40, 0, 7)


def test_native_trace_durations_and_launches_by_kernel(tmp_path: Path) -> None:
    path = native_trace(
        tmp_path / "t.jsonl", ["a", "b", "never"], [(1, 3, 300, 350), (0, 1, 100, 250), (0, 2, 400, 410)]
    )
    table = read_native_trace(path)
    assert len(table) == 3 and table.durations() == {"a": [150, 10], "b": [50]}
    first = sorted(table.launches(), key=lambda x: x.start)[0]
    assert first == KernelLaunch(1, "a", "a()", 100, 250, (8, 2, 1), (128, 1, 1), 528, 40, 0, 7)
    (a, b) = summarize_tables([table, table])
    assert (a.name, a.launches, a.total_ns, a.median_ns, a.demangled) == ("a", 4, 320, 80.0, "a()")
    assert (b.name, b.launches, b.total_ns) == ("b", 2, 100)
    assert (a.launch_ns, b.launch_ns) == ((150, 10, 150, 10), (50, 50))  # trace order, every process's


def test_a_kernel_keeps_every_launch_duration_up_to_the_limit_then_evenly_over_the_run() -> None:
    """At LAUNCH_DURATIONS_KEPT launches every one is kept; one more and the kept ones are spread over the
    whole run, the first and the last included, in trace order."""
    at_limit = list(range(LAUNCH_DURATIONS_KEPT))
    assert kept_launch_durations(at_limit) == tuple(at_limit)
    over = kept_launch_durations(list(range(LAUNCH_DURATIONS_KEPT + 1)))
    assert len(over) == LAUNCH_DURATIONS_KEPT and (over[0], over[-1]) == (0, LAUNCH_DURATIONS_KEPT)
    many = kept_launch_durations([10 * i for i in range(70_000)])
    assert len(many) == LAUNCH_DURATIONS_KEPT and (many[0], many[-1]) == (0, 699_990)
    steps = {b - a for a, b in pairwise(many)}
    assert steps <= {2740, 2750}  # evenly: 69,999 / 255 launches apart, rounded
    assert list(many) == sorted(many) and kept_launch_durations([]) == ()
    (stats,) = stats_of({"k": [7] * 70_000}, {})
    assert stats.launches == 70_000 and stats.launch_ns == (7,) * LAUNCH_DURATIONS_KEPT


def test_a_native_trace_without_launches_is_empty(tmp_path: Path) -> None:
    table = read_native_trace(native_trace(tmp_path / "t.jsonl", [], []))
    assert len(table) == 0 and table.durations() == {} and summarize_tables([table]) == []


@pytest.mark.parametrize(
    ("kernels", "launches", "count", "header", "message"),
    [
        (["a"], [(0, 1, 0, 10)], 2, NATIVE_HEADER, "holds 64 bytes where 2 launch records"),
        (["a"], [(1, 1, 0, 10)], None, NATIVE_HEADER, "names kernel 1, the table has 1"),
        (["a"], [(0, 1, 0, 10), (0, 2, 20, 19)], None, NATIVE_HEADER, "record 1 ends at 19, before its"),
        (["a"], [], None, {**NATIVE_HEADER, "record_bytes": 48}, "launch records of 48 bytes"),
        (["a"], [], None, {**NATIVE_HEADER, "version": 1}, "of version 1"),
    ],
)
def test_a_malformed_native_trace_is_refused_with_what_is_wrong(
    tmp_path: Path,
    kernels: list[str],
    launches: list[tuple[int, int, int, int]],
    count: int | None,
    header: dict[str, object],
    message: str,
) -> None:
    path = native_trace(tmp_path / "t.jsonl", kernels, launches, count=count, header=header)
    with pytest.raises(ProfileError, match=re.escape(message)):
        read_native_trace(path)


def test_an_unfinished_native_trace_is_refused(tmp_path: Path) -> None:
    path = native_trace(tmp_path / "t.jsonl", ["a"], [(0, 1, 0, 10)])
    path.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")  # no closing line
    with pytest.raises(ProfileError, match="no closing line with the launch count"):
        read_native_trace(path)
    Path(f"{path}.launches").unlink()
    path.write_text(path.read_text() + json.dumps({"launches": 1}) + "\n")
    with pytest.raises(ProfileError, match=r"launch records .* do not exist"):
        read_native_trace(path)
    skipped = native_trace(tmp_path / "u.jsonl", ["a", "b"], [])
    lines = skipped.read_text().splitlines()
    skipped.write_text("\n".join([lines[0], lines[2], lines[3]]) + "\n")  # kernel 1 without kernel 0
    with pytest.raises(ProfileError, match="kernel id 1 where 0 comes next"):
        read_native_trace(skipped)


def test_each_kernels_code_hash_is_read_from_the_closing_line(tmp_path: Path) -> None:
    codes = ["d41d3674da58c5de", None]
    path = native_trace(tmp_path / "t.jsonl", ["a", "b"], [(0, 1, 0, 10), (1, 2, 20, 25)], codes=codes)
    table = read_native_trace(path)
    assert table.codes == ("d41d3674da58c5de", None)
    other = native_trace(tmp_path / "u.jsonl", ["a"], [(0, 1, 0, 10)], codes=["0000000000000001"])
    stats = {s.name: s for s in summarize_tables([table, read_native_trace(other)])}
    assert (stats["a"].code_hash, stats["b"].code_hash) == ("d41d3674da58c5de", None)  # the first process's
    no_codes = read_native_trace(native_trace(tmp_path / "v.jsonl", ["a"], [(0, 1, 0, 10)]))
    assert summarize_tables([no_codes])[0].code_hash is None


@pytest.mark.parametrize("codes", [["d41d3674da58c5de"], ["D41D3674DA58C5DE", None], ["d41d", None], "x"])
def test_code_hashes_that_are_not_one_per_kernel_of_16_hex_digits_are_refused(
    tmp_path: Path, codes: object
) -> None:
    path = native_trace(tmp_path / "t.jsonl", ["a", "b"], [(0, 1, 0, 10)], codes=codes)
    with pytest.raises(ProfileError, match="is not a list of 2 code hashes"):
        read_native_trace(path)


def test_a_sampled_traces_unrecorded_launches_count_and_take_the_recorded_mean(tmp_path: Path) -> None:
    """A sampled trace (FORMAT.md, "Sampled launches"): a kernel's unrecorded launches count among its
    launches and add its recorded launches' mean each to its total; its median, extremes and kept
    durations are the recorded ones'. Over two processes the counts add up."""
    path = native_trace(
        tmp_path / "t.jsonl",
        ["a", "b"],
        [(0, 1, 100, 250), (1, 2, 300, 350), (0, 3, 400, 410)],
        unrecorded=[6, 0],
    )
    table = read_native_trace(path)
    assert table.unrecorded == (6, 0) and len(table) == 3
    (a, b) = summarize_tables([table])
    assert (a.name, a.launches, a.total_ns, a.mean_ns, a.median_ns) == ("a", 8, 160 + 6 * 80, 80.0, 80.0)
    assert (a.min_ns, a.max_ns, a.launch_ns) == (10, 150, (150, 10))
    assert (b.launches, b.total_ns) == (1, 50)
    unsampled = read_native_trace(native_trace(tmp_path / "u.jsonl", ["a"], [(0, 4, 0, 120)]))
    assert unsampled.unrecorded == ()
    (a,) = [s for s in summarize_tables([table, unsampled]) if s.name == "a"]
    assert (a.launches, a.total_ns) == (9, 280 + round(6 * 280 / 3))


def test_a_trace_sampled_where_nothing_was_left_unrecorded_reads_as_unsampled(tmp_path: Path) -> None:
    table = read_native_trace(native_trace(tmp_path / "t.jsonl", ["a"], [(0, 1, 100, 250)], unrecorded=[0]))
    assert table.unrecorded == ()
    assert [(s.launches, s.total_ns) for s in summarize_tables([table])] == [(1, 150)]


@pytest.mark.parametrize(
    ("unrecorded", "problem"),
    [
        ([1], "'unrecorded' is not a list of 2 launch counts"),
        ([1, -1], "'unrecorded' is not a list of 2 launch counts"),
        ([1, True], "'unrecorded' is not a list of 2 launch counts"),
        ({"a": 1}, "'unrecorded' is not a list of 2 launch counts"),
        ([0, 3], "b has unrecorded launches and no record to time them by"),
    ],
)
def test_a_malformed_unrecorded_count_is_refused(tmp_path: Path, unrecorded: object, problem: str) -> None:
    path = native_trace(tmp_path / "t.jsonl", ["a", "b"], [(0, 1, 100, 250)], unrecorded=unrecorded)
    with pytest.raises(ProfileError, match=re.escape(problem)):
        read_native_trace(path)

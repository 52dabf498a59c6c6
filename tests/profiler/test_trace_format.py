"""read_trace and summarize on hand-written JSON Lines traces (format: profiler/native/FORMAT.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from intelliperf.errors import ProfileError
from profiler.trace import KernelLaunch, read_trace, summarize

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
        (b"\x00\xff garbage \x13\n", "not an Accordo trace"),
        (b'{"accordo":"capture","version":1}\n', "not an Accordo trace"),
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

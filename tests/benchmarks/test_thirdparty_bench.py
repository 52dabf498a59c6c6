"""benchmarks/thirdparty.py on the CPU: the timing target's edges (3% of the plain run, 50 ms floor), the
set's figures, where a failed program counts nowhere, and which programs' runs scatter too much to settle
the rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import thirdparty
from benchmarks.thirdparty import (
    MOST_ROUNDS,
    NOT_STARTED,
    again_fields,
    command,
    load_fetch,
    report_fields,
    rounds_for,
    side_by_side,
    summarize,
    with_earlier_rows,
    within_timing_target,
)
from intelliperf.contract import PassTimings, Report


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


def rounds(name: str, excesses: list[float], plain_s: float = 1.0) -> dict:
    """A measured row whose rounds' timing passes exceed their plain runs by ``excesses``."""
    plain = [plain_s] * len(excesses)
    timed = [p + e for p, e in zip(plain, excesses, strict=True)]
    median = sorted(excesses)[len(excesses) // 2]
    return {
        "name": name,
        "plain_s": plain_s,
        "timing_s": plain_s + median,
        "plain_runs": plain,
        "timing_runs": timed,
    }


def test_a_program_is_undecided_when_its_excess_interval_holds_what_the_rule_allows() -> None:
    rows = [
        rounds("edge", [0.01, 0.02, 0.03, 0.04, 0.05]),  # five rounds: the whole range, up to 50 ms exactly
        rounds("below", [0.01, 0.02, 0.03, 0.04, 0.049]),
        rounds("above", [0.06, 0.07, 0.08, 0.09, 0.10]),  # over the rule, and surely so
        rounds("three", [0.0, 0.0, 0.0]),  # too few rounds for an interval
        rounds("long", [-0.2, 0.0, 0.2, 0.3, 0.4], plain_s=10.0),  # 3% of 10 s: 300 ms is allowed
        {"name": "failed", "error": "make exited 2"},
    ]
    figures = summarize(rows)
    assert figures["timing_rule_undecided"] == ["edge", "three", "long"]
    intervals = figures["timing_excess_intervals_s"]
    assert intervals["below"] == [0.01, 0.049] and intervals["above"] == [0.06, 0.1]
    assert "three" not in intervals and "failed" not in intervals


class ScriptedRuns:
    """Plain runs of 1 s and timing passes that exceed them by the scripted excesses (the last one repeated);
    ``calls`` is the order they ran in."""

    def __init__(self, excesses: list[float]) -> None:
        self.excesses = excesses
        self.calls: list[str] = []

    def plain(self) -> float:
        self.calls.append("plain")
        return 1.0

    def timed(self) -> float:
        index = sum(call == "timed" for call in self.calls)
        self.calls.append("timed")
        seconds = 1.0 + self.excesses[min(index, len(self.excesses) - 1)]
        return seconds


def run(script: ScriptedRuns, settle_s: float) -> tuple[list, list]:
    return side_by_side(script.plain, script.timed, first=5, settle_s=settle_s)


def test_without_settling_time_the_first_rounds_are_all_and_their_order_alternates() -> None:
    script = ScriptedRuns([0.0, 0.1])  # undecided: the interval holds the 50 ms allowed
    plain, timed = run(script, settle_s=0.0)
    assert len(plain) == len(timed) == 5
    assert script.calls[:4] == ["plain", "timed", "timed", "plain"]


def test_an_undecided_program_gets_rounds_until_its_interval_settles() -> None:
    # two excesses of 100 ms among zeros: at eleven rounds the interval's top is the 9th value, a zero
    script = ScriptedRuns([0.0, 0.1, 0.0, 0.1, 0.0, 0.0])
    plain, timed = run(script, settle_s=1000.0)
    assert len(plain) == len(timed) == 11


def test_extra_rounds_stop_at_most_rounds_and_at_the_settling_time() -> None:
    never = [0.0, 0.25] * MOST_ROUNDS  # never settles
    assert len(run(ScriptedRuns(never), settle_s=1000.0)[0]) == MOST_ROUNDS
    # rounds of 2.0 s and 2.25 s by turns (the fifth 2.0 s): the 6th (2.25 s) fits, the 7th (2.0 s) is started
    # while the extra 2.25 s and the last round's 2.25 s fit, and no 8th (4.25 s + 2.0 s)
    assert len(run(ScriptedRuns(never), settle_s=4.5)[0]) == 7
    assert len(run(ScriptedRuns(never), settle_s=4.49)[0]) == 6
    assert len(run(ScriptedRuns(never), settle_s=1.99)[0]) == 5


def test_a_failed_diagnosis_keeps_the_rounds_it_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nanoGPT's eager step: its rounds were measured, then `intelliperf run` stopped (exit 8); the row keeps
    the rounds, names the diagnosis's error, and counts in the timing figures but not in the counter ratio."""
    program = load_fetch().read_manifest()[0]
    (tmp_path / "src" / program.name).mkdir(parents=True)
    plain = iter([1.0, 1.10, 1.00, 0.90, 1.05, 1.00])  # the warm-up run, then five rounds
    timed = iter([9.0, 1.20, 1.04, 1.02, 0.98, 1.06])  # the warm-up pass, then five rounds
    monkeypatch.setattr(thirdparty, "plain_run", lambda argv, cwd: next(plain))
    monkeypatch.setattr(thirdparty, "timing_pass", lambda backend, argv, cwd: (next(timed), 0.9, 17387))
    monkeypatch.setattr(thirdparty.subprocess, "run", lambda *a, **k: None)  # the build line

    def stopped(argv: list[str], project: Path, out: Path) -> None:
        raise RuntimeError("intelliperf run exited 8: the profiled kernels carry no source-line information")

    monkeypatch.setattr(thirdparty, "diagnose", stopped)
    row = thirdparty.measure(program, tmp_path / "src", tmp_path / "scratch", tmp_path / "reports", 5, 0.0)
    assert "error" not in row and "exited 8" in row["diagnosis_error"]
    assert (row["plain_s"], row["timing_s"], row["launches"]) == (1.0, 1.04, 17387)
    assert row["plain_runs"] == [1.1, 1.0, 0.9, 1.05, 1.0] and "counters_s" not in row
    figures = summarize([row, {"name": "b", "plain_s": 1.0, "timing_s": 1.0, "counters_s": 3.0}])
    assert figures["measured"] == 2 and figures["diagnosis_failed"] == [program.name]
    assert figures["timing_overhead_max"] == 0.04 and figures["counter_ratio_max"] == 3.0


def test_each_round_names_the_cpu_time_and_page_faults_of_what_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plain runs are real child processes, the first of the five rounds' touching 64 MiB of fresh
    memory: its minor faults show it (16,384 pages of 4 KiB at least); the timing passes ran nothing."""
    program = load_fetch().read_manifest()[0]
    (tmp_path / "src" / program.name).mkdir(parents=True)
    runs = iter(["pass", "bytearray(b'1') * (64 << 20)"] + ["pass"] * 4)  # the warm-up run, then five rounds
    run_child = subprocess.run  # the module's own, before the build line's stand-in replaces it

    def plain_run(argv: list[str], cwd: Path) -> float:
        run_child([sys.executable, "-c", next(runs)], check=True)
        return 1.0

    monkeypatch.setattr(thirdparty, "plain_run", plain_run)
    monkeypatch.setattr(thirdparty, "timing_pass", lambda backend, argv, cwd: (1.0, 0.9, 10))
    monkeypatch.setattr(thirdparty.subprocess, "run", lambda *a, **k: None)  # the build line
    monkeypatch.setattr(thirdparty, "diagnose", lambda *a: (_ for _ in ()).throw(RuntimeError("skipped")))
    row = thirdparty.measure(program, tmp_path / "src", tmp_path / "scratch", tmp_path / "reports", 5, 0.0)
    plain, timing = row["plain_usage"], row["timing_usage"]
    assert len(plain) == len(row["plain_runs"]) == 5 and len(timing) == 5
    assert plain[0]["minflt"] >= 16384 and all(u["minflt"] < plain[0]["minflt"] / 2 for u in plain[1:])
    assert all(u["user_s"] > 0 or u["sys_s"] > 0 for u in plain)
    assert all(u == {"user_s": 0.0, "sys_s": 0.0, "minflt": 0, "majflt": 0} for u in timing)


RECORDED_REPORT = Path(__file__).parents[1] / "fixtures" / "gpu" / "torch_model" / "original" / "report.json"


def make_report(counters_s: float | None, timing_s: float) -> Report:
    """torch_model's report as recorded on the GPU machine, with these pass times."""
    report = Report.model_validate_json(RECORDED_REPORT.read_text())
    return report.model_copy(update={"passes": PassTimings(counters_s=counters_s, timing_s=timing_s)})


def test_the_diagnosis_run_adds_its_passes_and_the_counter_ratio() -> None:
    report = make_report(counters_s=4.0, timing_s=1.3)
    fields = report_fields(report, plain_s=2.0)
    assert (fields["counters_s"], fields["report_timing_s"], fields["counter_ratio"]) == (4.0, 1.3, 2.0)
    assert fields["hottest"] == report.kernels[0].demangled and fields["kernels"] == len(report.kernels)
    assert report_fields(make_report(counters_s=None, timing_s=1.3), plain_s=2.0)["counter_ratio"] is None


def test_the_second_run_is_held_to_the_per_program_rule_against_the_plain_median(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `intelliperf run`s after the rounds: the first's counters and timing, the second's timing (the
    reference copy's Triton cache kept) against the rule; a second run over it is named in the figures."""
    assert again_fields(make_report(counters_s=4.0, timing_s=0.55), plain_s=0.5) == {
        "report_again_timing_s": 0.55,
        "report_again_within_timing_target": True,
    }
    assert (
        again_fields(make_report(counters_s=4.0, timing_s=0.5501), plain_s=0.5)[
            "report_again_within_timing_target"
        ]
        is False
    )
    program = load_fetch().read_manifest()[0]
    (tmp_path / "src" / program.name).mkdir(parents=True)
    monkeypatch.setattr(thirdparty, "plain_run", lambda argv, cwd: 0.5)
    monkeypatch.setattr(thirdparty, "timing_pass", lambda backend, argv, cwd: (0.51, 0.5, 10))
    monkeypatch.setattr(thirdparty.subprocess, "run", lambda *a, **k: None)  # the build line
    reports = iter([make_report(counters_s=2.0, timing_s=0.7), make_report(counters_s=2.5, timing_s=0.6)])
    folders: list[Path] = []

    def diagnose(argv: list[str], project: Path, out: Path) -> Report:
        folders.append(out)
        return next(reports)

    monkeypatch.setattr(thirdparty, "diagnose", diagnose)
    row = thirdparty.measure(program, tmp_path / "src", tmp_path / "scratch", tmp_path / "reports", 5, 0.0)
    assert (row["report_timing_s"], row["counters_s"], row["report_again_timing_s"]) == (0.7, 2.0, 0.6)
    assert row["report_again_within_timing_target"] is False and folders[1] == folders[0] / "again"
    assert summarize([row])["report_again_outside_timing_target"] == [program.name]


class Killed(Exception):
    """The device call's time limit, arriving in the middle of a program."""


def test_a_run_stopped_midway_keeps_the_rows_it_measured_and_the_earlier_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nanoGPT's compiled run outlived its device call and took the whole output with it: the output is
    now written after each program, the earlier file's rows standing in for the programs not reached."""
    fetch = load_fetch()
    first, second, third = (p.name for p in fetch.read_manifest()[:3])
    monkeypatch.setattr(fetch, "in_place", lambda program, folder: True)
    monkeypatch.setattr(thirdparty, "device_name", lambda: "NVIDIA H200")

    def measure(program, *args: object) -> dict:
        if program.name == second:
            raise Killed
        return {"name": program.name, "plain_s": 1.0, "timing_s": 1.01, "counters_s": 2.0}

    monkeypatch.setattr(thirdparty, "measure", measure)
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"device": "NVIDIA H200", "rows": [{"name": third, "plain_s": 3.0}]}))
    out = tmp_path / "thirdparty.json"
    with pytest.raises(Killed):
        thirdparty.main(
            ["--only", f"{first},{second},{third}", "--out", str(out), "--rows-from", str(earlier)]
        )
    written = json.loads(out.read_text())
    assert [(r["name"], r.get("plain_s"), r.get("error")) for r in written["rows"]] == [
        (first, 1.0, None),
        (second, None, thirdparty.NOT_REACHED),
        (third, 3.0, None),
    ]
    assert written["measured"] == 1 and written["programs"] == 3


def test_runs_on_separate_gpus_join_into_one_table_without_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two runs at the same time, one GPU each, over an older table: each run's measured rows win, a
    placeholder of one run (a program it never started) gives way to the other run's or the older table's
    row, and a program nobody measured keeps one placeholder row. No GPU is asked for."""
    fetch = load_fetch()
    a, b, c, d = (p.name for p in fetch.read_manifest()[:4])

    def gpu_asked() -> str:
        raise AssertionError("--join measures nothing")

    monkeypatch.setattr(thirdparty, "device_name", gpu_asked)
    old = {"device": "NVIDIA H200", "rows": [{"name": a, "plain_s": 9.0}, {"name": b, "plain_s": 9.0}]}
    one = {"device": "NVIDIA H200", "rows": [{"name": a, "plain_s": 1.0}, {"name": c, "error": NOT_STARTED}]}
    two = {
        "device": "NVIDIA H200",
        "rows": [
            {"name": c, "plain_s": 3.0},
            {"name": d, "error": NOT_STARTED},
            {"name": b, "error": NOT_STARTED},
        ],
    }
    paths = []
    for name, output in (("old", old), ("one", one), ("two", two)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(output))
    out = tmp_path / "joined.json"
    assert thirdparty.main(["--join", "--rows-from", *map(str, paths), "--out", str(out)]) == 0
    joined = json.loads(out.read_text())
    assert joined["device"] == "NVIDIA H200"
    assert [(r["name"], r.get("plain_s"), r.get("error")) for r in joined["rows"]] == [
        (a, 1.0, None),
        (b, 9.0, None),
        (c, 3.0, None),
        (d, None, NOT_STARTED),
    ]


def test_join_needs_the_files_it_joins_and_one_device(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        thirdparty.main(["--join", "--out", str(tmp_path / "x.json")])
    h200, h100 = tmp_path / "h200.json", tmp_path / "h100.json"
    h200.write_text(json.dumps({"device": "NVIDIA H200", "rows": []}))
    h100.write_text(json.dumps({"device": "NVIDIA H100", "rows": []}))
    with pytest.raises(SystemExit):
        thirdparty.main(["--join", "--rows-from", str(h200), str(h100), "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("again_s", "beyond"), [(0.74, False), (0.7401, True), (None, False)], ids=["at-max", "over", "none"]
)
def test_a_second_run_longer_than_every_timing_pass_is_named(again_s: float | None, beyond: bool) -> None:
    """report_again_beyond_timing_runs: the user's second run against the rounds' own timing passes (their
    longest, 0.74 s, is not beyond), not against the plain median alone."""
    row = {"name": "p", "plain_s": 0.59, "timing_s": 0.61, "timing_runs": [0.60, 0.74, 0.61],
           "report_again_timing_s": again_s}  # fmt: skip
    assert summarize([row])["report_again_beyond_timing_runs"] == (["p"] if beyond else [])
    assert summarize([{**row, "timing_runs": []}])["report_again_beyond_timing_runs"] == []

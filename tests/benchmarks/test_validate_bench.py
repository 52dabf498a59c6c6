"""benchmarks/validate.py on the CPU: which GPU measured each section when a run measures some of them."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from accordo.signature import kernel_pattern
from benchmarks import validate
from benchmarks.validate import SECTIONS, replaced, section_devices, summary


def test_a_run_of_some_sections_keeps_the_earlier_devices_of_the_others() -> None:
    earlier = {"device": "NVIDIA H100 80GB HBM3"}
    devices = section_devices(earlier, {"cases", "stability"}, "NVIDIA H200")
    assert devices == {
        "cases": "NVIDIA H200",
        "examples": "NVIDIA H100 80GB HBM3",
        "speedup": "NVIDIA H100 80GB HBM3",
        "stability": "NVIDIA H200",
    }
    again = section_devices({"device": "NVIDIA H200", "devices": devices}, {"examples"}, "NVIDIA H200")
    assert again["speedup"] == "NVIDIA H100 80GB HBM3" and again["examples"] == "NVIDIA H200"


def test_a_first_run_of_some_sections_knows_no_device_for_the_others() -> None:
    devices = section_devices({}, {"speedup"}, "NVIDIA H200")
    assert devices == {section: ("NVIDIA H200" if section == "speedup" else None) for section in SECTIONS}


def test_a_section_measured_a_few_pairs_at_a_time_names_every_gpu_its_rows_came_from() -> None:
    earlier = {"devices": {section: "NVIDIA H100 80GB HBM3" for section in SECTIONS}}
    rows = [{"pair": "transpose_bank", "device": "NVIDIA H200"}, {"pair": "work_queue"}]
    devices = section_devices(earlier, {"examples"}, "NVIDIA H200", {"examples": rows, "speedup": []})
    assert devices["examples"] == "NVIDIA H100 80GB HBM3; NVIDIA H200"
    assert devices["speedup"] == "NVIDIA H100 80GB HBM3"
    rows[1]["device"] = "NVIDIA H200"
    again = section_devices(earlier, {"examples"}, "NVIDIA H200", {"examples": rows})
    assert again["examples"] == "NVIDIA H200"


def test_a_pair_measured_again_replaces_its_row_and_a_new_one_comes_last() -> None:
    rows = [{"pair": "a", "speedup": 1.0}, {"pair": "b", "speedup": 2.0}]
    rows = replaced(rows, {"pair": "a", "speedup": 1.5})
    assert rows == [{"pair": "b", "speedup": 2.0}, {"pair": "a", "speedup": 1.5}]
    assert [r["pair"] for r in replaced(rows, {"pair": "c"})] == ["b", "a", "c"]


def test_the_summary_counts_only_the_rows_it_holds() -> None:
    examples = [
        {"pair": "x", "expected": "pass", "expected_reason": None, "verdict": "pass", "reason": None,
         "detail": None, "right": True, "capture_ratio": 1.2, "device": "NVIDIA H200"},
        {"pair": "y", "expected": "pass", "expected_reason": None, "verdict": "fail",
         "reason": "timing_disagreement", "detail": "d", "right": False, "capture_ratio": 1.6},
    ]  # fmt: skip
    result = summary({"device": "NVIDIA H100 80GB HBM3"}, {"examples"}, "NVIDIA H200", [], examples, [], None)
    assert result["verdicts_right"] == 0.5
    assert result["capture_ratio"] == 1.4 and result["capture_ratio_max"] == 1.6
    assert result["devices"]["examples"] == "NVIDIA H100 80GB HBM3; NVIDIA H200"
    assert result["speedup_error"] is None and result["verdict_stability"] is None


def test_a_section_written_twice_names_each_gpu_once() -> None:
    """The second run reads the first one's joined devices back as the earlier GPU of rows without one."""
    first = {"devices": {section: "NVIDIA H100 80GB HBM3" for section in SECTIONS}}
    rows = [{"pair": "a", "device": "NVIDIA H200"}, {"pair": "b"}]
    devices = section_devices(first, {"examples"}, "NVIDIA H200", {"examples": rows})
    again = section_devices({"devices": devices}, {"examples"}, "NVIDIA H200", {"examples": rows})
    assert again["examples"] == "NVIDIA H100 80GB HBM3; NVIDIA H200"


def test_a_run_stopped_midway_keeps_its_rows_and_claims_no_section_it_did_not_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a device call's time limit leaves: the examples measured so far, written; the stability
    section asked for but never reached keeps its earlier GPU."""
    out = tmp_path / "validate.json"
    out.write_text(json.dumps({"devices": {section: "GPU-A" for section in SECTIONS}}))
    row = {"pair": "transpose_bank", "expected": "pass", "expected_reason": None, "verdict": "pass",
           "reason": None, "detail": None, "right": True, "capture_ratio": 1.3}  # fmt: skip

    def one_row_then_killed(_only: object) -> Iterator[dict]:
        yield row
        raise TimeoutError("the call's limit")

    monkeypatch.setattr(validate.shutil, "which", lambda _name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(validate, "device_name", lambda: "GPU-B")
    monkeypatch.setattr(validate, "example_rows", one_row_then_killed)
    monkeypatch.setattr(
        sys, "argv", ["validate", "--out", str(out), "--only", "examples", "--only", "stability"]
    )
    with pytest.raises(TimeoutError):
        validate.main()
    written = json.loads(out.read_text())
    assert [(r["pair"], r["device"]) for r in written["cases_examples"]] == [("transpose_bank", "GPU-B")]
    assert written["devices"] == {
        "cases": "GPU-A",
        "examples": "GPU-B",
        "speedup": "GPU-A",
        "stability": "GPU-A",
    }


def test_a_speedup_row_times_the_examples_main_instantiation_where_its_kernel_name_matches_several() -> None:
    examples = {e["name"]: e for e in json.loads((validate.EXAMPLES / "examples.json").read_text())}
    tile_sums = validate.measured_kernel(examples["tile_sums"])
    assert tile_sums == "_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi"
    pattern = re.compile(kernel_pattern(tile_sums))
    assert pattern.fullmatch(tile_sums) and not pattern.fullmatch("_ZN4geom9tile_sumsILi1EEEvPK6float2Pfi")
    assert validate.measured_kernel(examples["transpose_bank"]) == examples["transpose_bank"]["kernel"]

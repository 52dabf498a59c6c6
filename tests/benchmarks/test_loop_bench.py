"""benchmarks/loop.py on the CPU: the judge's fields of a recorded report, and the pull request it opens on
the fake GitHub (tests/support/fake_github.py) with the reproducer or a reason why none went with it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accordo.reproducer import REPRODUCER_FILES
from benchmarks.common import earlier_outputs, joined_rows
from benchmarks.loop import MANIFEST, checks_text, drop_reproducer, judge_fields, open_pull
from intelliperf.contract import Report

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "benchmarks" / "results" / "loop" / "transpose_bank" / "report.json"


def recorded() -> Report:
    return Report.model_validate_json(RECORDED.read_text())


def test_the_judges_fields_come_from_the_best_attempt() -> None:
    report = recorded()
    best = report.best_attempt
    assert best is not None and best.validation is not None
    fields = judge_fields(report)
    assert fields["checks"] == {c.name: c.outcome for c in best.validation.checks}
    assert fields["reproducer"] == (report.best is not None and report.best.reproducer is not None)
    isolated = best.validation.isolated_speedup
    assert fields["isolated_speedup"] == (round(isolated.median, 4) if isolated else None)


def test_the_table_names_checks_that_did_not_pass_and_the_pull_requests_reproducer() -> None:
    row = {"checks": {"end_to_end": "passed", "replay": "skipped"}, "pull_request_reproducer": True}
    assert checks_text(row) == "end_to_end replay=skipped / PR with reproducer"
    assert checks_text({"checks": {}}) == ""


def test_the_pull_request_carries_the_reproducer_folder(tmp_path: Path) -> None:
    folder = tmp_path / "reproducer"
    folder.mkdir()
    for name in REPRODUCER_FILES:
        (folder / name).write_bytes(name.encode() * 10)
    row = open_pull("transpose_bank", recorded(), folder, tmp_path)
    assert row["pull_request_reproducer"] is True
    body = (tmp_path / "pull_request.md").read_text()
    assert "### Reproducer" in body and "intelliperf replay .intelliperf/reproducer" in body
    assert row["pull_request"].endswith("/pull/1")


def test_without_a_reproducer_the_body_says_why(tmp_path: Path) -> None:
    row = open_pull("transpose_bank", recorded(), tmp_path / "none", tmp_path)
    assert row["pull_request_reproducer"] is False
    assert row["pull_request_reproducer_note"].startswith("Not attached:")
    assert json.dumps(row)  # the row goes into loop.json as it is


def test_the_reproducer_leaves_the_reports_folder_and_the_row_keeps_its_size(tmp_path: Path) -> None:
    folder = tmp_path / "reproducer"
    (folder / "captures").mkdir(parents=True)
    (folder / "captures" / "reference.bin").write_bytes(b"x" * 1000)
    (folder / "README.md").write_text("intelliperf replay .\n")
    assert drop_reproducer(folder) == {"reproducer_bytes": 1000 + len("intelliperf replay .\n")}
    assert not folder.exists() and tmp_path.exists()
    assert drop_reproducer(folder) == {"reproducer_bytes": None}


def output(folder: Path, file: str, device: str, *names: str) -> Path:
    path = folder / file
    path.write_text(
        json.dumps({"device": device, "examples": [{"name": n, "device_run": device} for n in names]})
    )
    return path


def test_earlier_rows_join_in_manifest_order_and_a_rerun_replaces_its_row(tmp_path: Path) -> None:
    paths = [
        output(tmp_path, "a.json", "NVIDIA H200", "strided_copy", "transpose_bank"),
        output(tmp_path, "b.json", "NVIDIA H200", "aos_field"),
    ]
    earlier = earlier_outputs(paths, "NVIDIA H200")
    now = [{"name": "transpose_bank", "device_run": "now"}]
    rows = joined_rows(earlier, now, key="name", order=[e["name"] for e in MANIFEST])
    assert [row["name"] for row in rows] == ["transpose_bank", "strided_copy", "aos_field"]
    assert rows[0]["device_run"] == "now"


def test_rows_from_another_device_are_refused(tmp_path: Path) -> None:
    paths = [
        output(tmp_path, "a.json", "NVIDIA H200", "aos_field"),
        output(tmp_path, "b.json", "NVIDIA H100 80GB HBM3", "strided_copy"),
    ]
    with pytest.raises(ValueError, match="H100 80GB HBM3, this run from NVIDIA H200"):
        earlier_outputs(paths, "NVIDIA H200")

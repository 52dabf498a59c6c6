"""The worker's GPU run (tests/test_gpu_worker.py on the H100, benchmarks/results/worker_e2e/): its report,
events and pull request, replayed through the code that made them."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.loop_scenarios import fixed_source
from intelliperf.contract import Report
from intelliperf.summary import render_summary
from worker.pull_request import apply_diff, branch_prefix, pull_request_title

RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "worker_e2e"
REPORT = Report.model_validate_json((RECORDED / "worker_job_report.json").read_text())
PULL = json.loads((RECORDED / "worker_pull_request.json").read_text())


def test_the_pull_request_is_what_the_writer_makes_of_the_gpu_report() -> None:
    assert (
        PULL["title"]
        == pull_request_title(REPORT)
        == ("[IntelliPerf] transpose_tiled: Shared-memory bank conflicts, 1.65x faster")
    )
    assert PULL["body"] == render_summary(REPORT)
    assert PULL["head"].startswith(branch_prefix(REPORT))


def test_the_gpu_report_s_diff_is_the_fix_the_pull_request_carries() -> None:
    source, original, fixed = fixed_source("transpose_bank")
    assert REPORT.diff is not None
    assert apply_diff(REPORT.diff, {source: original}) == {source: fixed} == PULL["files"]
    assert REPORT.best is not None and REPORT.best.speedup.verdict == "faster"
    assert REPORT.device is not None and REPORT.device.name == "NVIDIA H100 80GB HBM3"


def test_the_job_s_events_were_streamed_stage_by_stage() -> None:
    stages = [
        json.loads(line.removeprefix("data: ")).get("stage")
        for line in (RECORDED / "worker_events.txt").read_text().splitlines()
        if line.startswith("data: ") and '"stage"' in line
    ]
    for expected in (
        "queued",
        "running",
        "build",
        "timing",
        "counters",
        "diagnose",
        "pull_request",
        "succeeded",
    ):
        assert expected in stages
    assert stages.index("counters") < stages.index("pull_request") < stages.index("succeeded")

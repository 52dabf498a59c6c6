"""The worker's GPU run (tests/test_gpu_worker.py on the H100, benchmarks/results/worker_e2e/): its report,
events and pull request, replayed through the code that made them."""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchmarks.loop_scenarios import fixed_source
from intelliperf.contract import Report
from intelliperf.summary import render_summary
from worker.pull_request import (
    REPRODUCER_LIMIT,
    apply_diff,
    branch_prefix,
    pull_request_title,
    reproducer_section,
)

RECORDED = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "worker_e2e"
REPORT = Report.model_validate_json((RECORDED / "worker_job_report.json").read_text())
PULL = json.loads((RECORDED / "worker_pull_request.json").read_text())


def test_the_pull_request_is_what_the_writer_makes_of_the_gpu_report() -> None:
    assert REPORT.best is not None
    assert PULL["title"] == pull_request_title(REPORT)
    assert PULL["title"].endswith(
        f"transpose_tiled: Shared-memory bank conflicts, {REPORT.best.speedup.median:.2f}x faster"
    )
    assert PULL["head"].startswith(branch_prefix(REPORT))


def test_the_body_links_the_reproducer_the_service_keeps() -> None:
    """transpose's reproducer (two captures of two 64 MiB matrices) is over what a pull request carries:
    the body gives the service's address of it instead."""
    summary = render_summary(REPORT)
    assert PULL["body"].startswith(summary + "\n\n### Reproducer")
    size = re.search(r"the reproducer \(([\d.]+) MiB\)", PULL["body"])
    url = re.search(r"-o reproducer\.tar\.gz (http://\S+/v1/jobs/[0-9a-f]{32}/reproducer)", PULL["body"])
    assert size is not None and url is not None and float(size.group(1)) * 2**20 > REPRODUCER_LIMIT
    limit = REPRODUCER_LIMIT >> 20
    why = f"the reproducer ({size.group(1)} MiB) is over the {limit} MiB a pull request carries"
    assert PULL["body"] == summary + "\n\n" + reproducer_section(None, None, why, url.group(1))


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
        "reproducer",
        "pull_request",
        "succeeded",
    ):
        assert expected in stages
    assert stages.index("counters") < stages.index("reproducer") < stages.index("pull_request")
    assert stages.index("pull_request") < stages.index("succeeded")

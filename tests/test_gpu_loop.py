"""The optimization loop end to end on the GPU: `intelliperf run` as a user runs it, its model a scripted
server on 127.0.0.1 that answers garbage, then an edit that does not compile, then a wrong one, then the
fix. Every verdict comes from a real build, Accordo on the GPU and Nsight Compute. (A rewrite judged by the
project's own tests: tests/test_gpu_loop_unittest.py; a PyTorch model's Triton kernel:
tests/test_gpu_loop_torch.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.loop_scenarios import FEEDBACK_EXAMPLE, feedback_script, fixed_source
from intelliperf.contract import Report
from tests.support.loop_run import KEY, ROOT, run_scripted
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.gpu


def test_feedback_reaches_the_model_and_the_fix_is_written_back(tmp_path: Path) -> None:
    project = tmp_path / FEEDBACK_EXAMPLE
    shutil.copytree(ROOT / "examples" / FEEDBACK_EXAMPLE, project, ignore=shutil.ignore_patterns("bin"))
    source, _, fixed = fixed_source(FEEDBACK_EXAMPLE)
    with ScriptedLLM(feedback_script(), key=KEY) as server:
        done = run_scripted(
            server,
            "-f", "bankConflict", "-b", "make", "-p", str(project), "--num_attempts", "6", "-l",
            "-o", str(tmp_path / "report.json"), "--summary_file", str(tmp_path / "summary.md"),
            "--", "./bin/transpose", "20",
        )  # fmt: skip
        prompts = [request["messages"][-1]["content"] for request in server.requests]
    assert done.returncode == 0, done.stderr
    report = Report.model_validate(json.loads((tmp_path / "report.json").read_text()))
    assert [a.status for a in report.attempts] == ["unparseable", "build_failed", "invalid", "success"]
    assert len(prompts) == 4
    assert "not in the required format" in prompts[1]
    assert 'identifier "kTlie" is undefined' in prompts[2]
    invalid = report.attempts[2]
    assert invalid.validation is not None and invalid.validation.failure == "mismatch"
    assert invalid.validation.reason and invalid.validation.reason.split(";")[0] in prompts[3]
    assert report.optimization is not None and report.optimization.status == "success"
    best = report.best
    assert best is not None and best.attempt == 4 and best.written_back
    assert best.speedup.verdict == "faster" and best.speedup.low > 1.5
    assert best.metric_before > 1e6 and best.metric_after < 0.05 * best.metric_before
    assert report.diff and "+    __shared__ float tile[kTile][kTile + 1];" in report.diff
    assert (project / source).read_text() == fixed
    validation = report.attempts[3].validation
    assert validation is not None and validation.isolated_speedup is not None
    assert validation.isolated_speedup.median > 1.5  # the kernels alone, one captured launch replayed
    assert [c.name for c in validation.checks if c.outcome == "passed"][-5:] == [
        "launch_pattern",
        "replay",
        "revalidated",
        "timed_launches",
        "timing_agreement",
    ]
    summary = (tmp_path / "summary.md").read_text()
    assert f"{best.speedup.median:.2f}x" in summary and "```diff" in summary
    assert "Kernel alone, L2 flushed" in summary
    assert "attempt 1/6" in done.stderr and "attempt 4/6" in done.stderr

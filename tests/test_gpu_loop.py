"""The optimization loop end to end on the GPU: `intelliperf run` as a user runs it, its model a scripted
server on 127.0.0.1 that answers garbage, then an edit that does not compile, then a wrong one, then the
fix. Every verdict comes from a real build, Accordo on the GPU and Nsight Compute."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.loop_scenarios import FEEDBACK_EXAMPLE, feedback_script, fixed_source, known_fix
from intelliperf.contract import Report
from tests.support.scripted_llm import ScriptedLLM

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-scripted-gpu-test"

PYTHONPATH = os.environ.get("PYTHONPATH", "")

pytestmark = pytest.mark.gpu


def run_scripted(server: ScriptedLLM, *args: str) -> subprocess.CompletedProcess[str]:
    """`intelliperf run` with the scripted model at ``server`` and the given options and command."""
    return subprocess.run(
        [sys.executable, "-m", "intelliperf", "run", "-m", "scripted", "--api_base", server.api_base, *args],
        cwd=ROOT,
        env={**os.environ, "LLM_GATEWAY_KEY": KEY, "PYTHONPATH": f"{ROOT}{os.pathsep}{PYTHONPATH}"},
        capture_output=True,
        text=True,
        timeout=900,
    )


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
    summary = (tmp_path / "summary.md").read_text()
    assert f"{best.speedup.median:.2f}x" in summary and "```diff" in summary
    assert "attempt 1/6" in done.stderr and "attempt 4/6" in done.stderr


def test_a_pytorch_model_gets_its_triton_kernel_rewritten_without_a_build(tmp_path: Path) -> None:
    """torch_model: library kernels take most of the time; the loop rewrites the Triton kernel (and its
    launch grid), judged by Accordo on cuLaunchKernelEx launches, with no build command."""
    pytest.importorskip("triton")
    project = tmp_path / "torch_model"
    shutil.copytree(ROOT / "examples" / "torch_model", project)
    source, _, fixed = fixed_source("torch_model")
    with ScriptedLLM([known_fix("torch_model")], key=KEY) as server:
        done = run_scripted(
            server,
            "-f", "auto", "-p", str(project), "--num_attempts", "1", "-o", str(tmp_path / "report.json"),
            "--", "./model.py", "3",
        )  # fmt: skip
        prompt = "\n".join(message["content"] for message in server.requests[0]["messages"])
    assert done.returncode == 0, done.stderr
    report = Report.model_validate(json.loads((tmp_path / "report.json").read_text()))
    assert report.selected is not None and report.selected.formula == "memoryAccess"
    assert report.kernels[0].library and not report.kernels[1].library  # cuBLAS is hotter; not a target
    assert report.passes.build_s is None
    assert "Triton kernel" in prompt and "Cycles inside the kernel" in prompt
    attempt = report.attempts[0]
    assert attempt.status == "success", attempt.reason
    assert "build" not in attempt.seconds
    assert report.best is not None and report.best.speedup.low > 1.5
    assert report.best.files == [source] and (project / source).read_text() != fixed  # not in place


def test_a_layout_change_is_judged_by_the_projects_tests(tmp_path: Path) -> None:
    """aos_field's real fix changes the data layout (host code and the kernel's input): Accordo rightly calls
    it an input mismatch; with --unittest_command the example's own test (check.sh) judges it, and the
    speedup is the application's kernel time."""
    project = tmp_path / "aos_field"
    shutil.copytree(ROOT / "examples" / "aos_field", project, ignore=shutil.ignore_patterns("bin"))
    reports = {}
    for judge, extra in (("accordo", []), ("unittest", ["--unittest_command", "./check.sh"])):
        out = tmp_path / f"{judge}.json"
        with ScriptedLLM([known_fix("aos_field")], key=KEY) as server:
            done = run_scripted(
                server,
                "-f", "memoryAccess", "-b", "make", "-p", str(project), "--num_attempts", "1", *extra,
                "-o", str(out), "--summary_file", str(tmp_path / f"{judge}.md"),
                "--", "./bin/aos_field", "20",
            )  # fmt: skip
        assert done.returncode == 0, done.stderr
        reports[judge] = Report.model_validate(json.loads(out.read_text()))
    by_accordo = reports["accordo"].attempts[0]
    assert by_accordo.status == "invalid" and by_accordo.validation is not None
    assert by_accordo.validation.failure == "input_mismatch" and by_accordo.validation.judge == "accordo"
    by_tests = reports["unittest"]
    attempt = by_tests.attempts[0]
    assert attempt.status == "success", attempt.reason
    assert attempt.validation is not None and attempt.validation.judge == "unittest"
    assert by_tests.optimization is not None and by_tests.optimization.judge == "unittest"
    assert by_tests.best is not None and by_tests.best.speedup.low > 1.5
    assert by_tests.best.metric_after < 0.5 * by_tests.best.metric_before
    assert "Judged by the project's own tests" in (tmp_path / "unittest.md").read_text()

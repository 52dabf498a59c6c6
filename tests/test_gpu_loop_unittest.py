"""The optimization loop on the GPU with the project's own tests as the judge: aos_field's real fix changes
the data layout, which Accordo rightly rejects and the example's check.sh accepts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.loop_scenarios import known_fix
from intelliperf.contract import Report
from tests.support.loop_run import KEY, ROOT, run_scripted
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.gpu


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

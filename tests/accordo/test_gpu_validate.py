"""Accordo's verdicts on the GPU: the validation cases fail for their stated reason, a hung candidate is
killed and the next validation runs normally, failures name the buffer and index, and the CLI's exit codes.
(The fixed examples against their originals: test_gpu_validate_examples.py; the float sums:
test_gpu_validate_sums.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accordo.validate import ValidationOptions, validate
from intelliperf.cli import app
from profiler.build import CACHE_VARIABLE
from tests.accordo.conftest import build_example

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = ROOT / "examples" / "accordo_cases"
EXAMPLES = ROOT / "examples"
CASES = json.loads((CASES_DIR / "cases.json").read_text())

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cases(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example(CASES_DIR, tmp_path_factory.mktemp("cases"))


@pytest.mark.parametrize("case", CASES, ids=[Path(c["candidate"]).name for c in CASES])
def test_case_verdict(cases: Path, native_lib: Path, case: dict) -> None:
    hang = Path(case["candidate"]).name == "hang"
    options = ValidationOptions(measure=False, timeout_s=15 if hang else 120)
    result = validate(
        case["kernel"],
        [case["reference"]],
        [case["candidate"]],
        cwd=cases,
        options=options,
        library=native_lib,
    )
    assert result.passed is (case["expected"] == "pass"), result.reason
    assert result.failure == case["reason"], result.reason
    if result.passed:
        assert result.launches_compared == 5
        assert all(b.passed for launch in result.launches for b in launch.buffers)


def test_next_validation_after_hang_runs_normally(cases: Path, native_lib: Path) -> None:
    hung = validate(
        "block_sum",
        ["bin/ref"],
        ["bin/hang"],
        cwd=cases,
        options=ValidationOptions(measure=False, timeout_s=10, calibration_runs=1),
        library=native_lib,
    )
    assert hung.failure == "timeout"
    after = validate(
        "block_sum",
        ["bin/ref"],
        ["bin/fixed_good"],
        cwd=cases,
        options=ValidationOptions(runs=3, timeout_s=60),
        library=native_lib,
    )
    assert after.passed, after.reason
    assert after.speedup is not None and after.speedup.runs == 3
    assert after.speedup.reference_ns > 0 and after.speedup.candidate_ns > 0


def test_failure_details_name_the_buffer_and_index(cases: Path, native_lib: Path) -> None:
    """droptail: the tail block's partial (index n // 256 of launch 1) is the first bad element."""
    result = validate(
        "block_sum",
        ["bin/ref"],
        ["bin/droptail"],
        cwd=cases,
        options=ValidationOptions(measure=False),
        library=native_lib,
    )
    assert result.failure == "mismatch"
    first = result.launches[0]
    partial = next(b for b in first.buffers if b.param == 1)
    assert partial.role == "output" and partial.dtype == "float32"
    assert partial.first_mismatch == (1048653 // 256)
    assert partial.mismatches == 1
    assert all(not launch.passed for launch in result.launches)
    inputs = next(b for b in first.buffers if b.param == 0)
    assert inputs.role == "input" and inputs.passed


def test_cli_validate_exit_codes(cases: Path, native_lib: Path, native_cache: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {CACHE_VARIABLE: str(native_cache)}  # where native_lib was built
    ok = runner.invoke(
        app,
        ["validate", "-k", "block_sum", "--reference", "bin/ref", "--candidate", "bin/fixed_good",
         "--runs", "3", "--cwd", str(cases), "-o", str(tmp_path / "ok.json")],
        env=env,
    )  # fmt: skip
    assert ok.exit_code == 0, ok.output
    assert "PASS" in ok.output and "speedup" in ok.output
    saved = json.loads((tmp_path / "ok.json").read_text())
    assert saved["passed"] is True and saved["speedup"]["runs"] == 3
    bad = runner.invoke(
        app,
        ["validate", "-k", "block_sum", "--reference", "bin/ref", "--candidate", "bin/half_accum",
         "--no-timing", "--cwd", str(cases)],
        env=env,
    )  # fmt: skip
    assert bad.exit_code == 1, bad.output
    assert "FAIL (mismatch)" in bad.output

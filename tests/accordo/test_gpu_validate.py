"""Accordo's verdicts on the GPU: the validation cases fail for their stated reason, the fixed examples
pass against their originals, a hung candidate is killed and the next validation runs normally."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accordo.validate import ValidationOptions, validate
from intelliperf.cli import app

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = ROOT / "examples" / "accordo_cases"
EXAMPLES = ROOT / "examples"
CASES = json.loads((CASES_DIR / "cases.json").read_text())
MANIFEST = json.loads((EXAMPLES / "examples.json").read_text())
# AoS to SoA is a data-layout change, not a kernel rewrite: the kernel is given other input bytes.
EXAMPLE_FAILURE = {"aos_field": "input_mismatch"}

pytestmark = pytest.mark.gpu


def _make(folder: Path, copy_to: Path) -> Path:
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("nvcc is not installed")
    target = copy_to / folder.name
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("bin"))
    proc = subprocess.run(
        ["make", "-j8"], cwd=target, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return target


@pytest.fixture(scope="module")
def cases(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _make(CASES_DIR, tmp_path_factory.mktemp("cases"))


@pytest.mark.parametrize("case", CASES, ids=[Path(c["candidate"]).name for c in CASES])
def test_case_verdict(cases: Path, accordo_lib: Path, case: dict) -> None:
    hang = Path(case["candidate"]).name == "hang"
    options = ValidationOptions(measure=False, timeout_s=15 if hang else 120)
    result = validate(
        case["kernel"],
        [case["reference"]],
        [case["candidate"]],
        cwd=cases,
        options=options,
        library=accordo_lib,
    )
    assert result.passed is (case["expected"] == "pass"), result.reason
    assert result.failure == case["reason"], result.reason
    if result.passed:
        assert result.launches_compared == 5
        assert all(b.passed for launch in result.launches for b in launch.buffers)


def test_next_validation_after_hang_runs_normally(cases: Path, accordo_lib: Path) -> None:
    hung = validate(
        "block_sum",
        ["bin/ref"],
        ["bin/hang"],
        cwd=cases,
        options=ValidationOptions(measure=False, timeout_s=10, calibration_runs=1),
        library=accordo_lib,
    )
    assert hung.failure == "timeout"
    after = validate(
        "block_sum",
        ["bin/ref"],
        ["bin/fixed_good"],
        cwd=cases,
        options=ValidationOptions(runs=3, timeout_s=60),
        library=accordo_lib,
    )
    assert after.passed, after.reason
    assert after.speedup is not None and after.speedup.runs == 3
    assert after.speedup.reference_ns > 0 and after.speedup.candidate_ns > 0


def test_failure_details_name_the_buffer_and_index(cases: Path, accordo_lib: Path) -> None:
    """droptail: the tail block's partial (index n // 256 of launch 1) is the first bad element."""
    result = validate(
        "block_sum",
        ["bin/ref"],
        ["bin/droptail"],
        cwd=cases,
        options=ValidationOptions(measure=False),
        library=accordo_lib,
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


def test_cli_validate_exit_codes(cases: Path, accordo_lib: Path, accordo_cache: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"ACCORDO_CACHE_DIR": str(accordo_cache)}  # where accordo_lib was built
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


@pytest.fixture(scope="module")
def examples_built(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("examples")
    for example in MANIFEST:
        _make(EXAMPLES / example["name"], root)
    return root


@pytest.mark.parametrize("example", MANIFEST, ids=[e["name"] for e in MANIFEST])
def test_fixed_example_passes_against_original(
    examples_built: Path, accordo_lib: Path, example: dict
) -> None:
    result = validate(
        example["kernel"],
        [example["app"], "3"],
        [example["fixed_app"], "3"],
        cwd=examples_built / example["name"],
        options=ValidationOptions(measure=False),
        library=accordo_lib,
    )
    expected = EXAMPLE_FAILURE.get(example["name"])
    assert result.failure == expected, result.reason
    if expected is None:
        assert result.launches_compared == 3

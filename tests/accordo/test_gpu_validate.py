"""Accordo's verdicts on the GPU: the validation cases fail for their stated reason, the fixed examples
pass against their originals, a hung candidate is killed and the next validation runs normally."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from accordo.validate import Reference, ValidationOptions, capture_reference, check_candidate, validate
from intelliperf.cli import app
from tests.accordo.conftest import build_example

ROOT = Path(__file__).resolve().parents[2]
CASES_DIR = ROOT / "examples" / "accordo_cases"
EXAMPLES = ROOT / "examples"
CASES = json.loads((CASES_DIR / "cases.json").read_text())
MANIFEST = json.loads((EXAMPLES / "examples.json").read_text())
# AoS to SoA is a data-layout change, not a kernel rewrite: the kernel is given other input bytes. (The
# fixed tile_sums, which adds each tile up in another order into an output its next launch starts from,
# failed as input_mismatch until each launch was judged on the reference's own inputs.)
EXAMPLE_FAILURE = {"aos_field": "input_mismatch"}
EXAMPLE_KERNELS = {"tile_sums": 6}

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cases(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example(CASES_DIR, tmp_path_factory.mktemp("cases"))


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
        build_example(EXAMPLES / example["name"], root)
    return root


@pytest.mark.parametrize("example", MANIFEST, ids=[e["name"] for e in MANIFEST])
def test_fixed_example_passes_against_original(
    examples_built: Path, accordo_lib: Path, example: dict
) -> None:
    result = validate(
        example["kernel"],
        [f"./{example['app']}", "3"],
        [f"./{example['fixed_app']}", "3"],
        cwd=examples_built / example["name"],
        options=ValidationOptions(measure=False),
        library=accordo_lib,
    )
    expected = EXAMPLE_FAILURE.get(example["name"])
    assert result.failure == expected, result.reason
    if expected is None:  # 3 iterations of each kernel the name matches (tile_sums: 6 instantiations)
        assert result.launches_compared == 3 * EXAMPLE_KERNELS.get(example["name"], 1)


SUMS_DIR = EXAMPLES / "accordo_sums"
SUMS = json.loads((SUMS_DIR / "cases.json").read_text())
DECIDED = [c for c in SUMS["cases"] if not c.get("undetectable")]  # the others: examples/accordo_sums
SUMS_N = "262221"  # 2^18 + 77 elements: an atomicAdd chain long enough to be noisy, quick to capture


@pytest.fixture(scope="module")
def sums(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example(SUMS_DIR, tmp_path_factory.mktemp("sums"))


def _sums_reference(sums: Path, accordo_lib: Path, data: str) -> Reference:
    return capture_reference(
        SUMS["kernel"],
        [SUMS["reference"], SUMS_N, "1", data],
        cwd=sums,
        options=ValidationOptions(measure=False),
        library=accordo_lib,
    )


@pytest.fixture(scope="module")
def signed_reference(sums: Path, accordo_lib: Path) -> Reference:
    return _sums_reference(sums, accordo_lib, "signed")


@pytest.fixture(scope="module")
def drift_reference(sums: Path, accordo_lib: Path) -> Reference:
    return _sums_reference(sums, accordo_lib, "drift")


@pytest.mark.parametrize("data", ["signed", "drift"])
def test_a_noisy_reference_is_calibrated_on_more_runs(request: pytest.FixtureRequest, data: str) -> None:
    """The atomicAdd chain's result moves from run to run: the reference is captured noise_runs times,
    not calibration_runs, so the spread its bound rests on is a stable estimate."""
    reference: Reference = request.getfixturevalue(f"{data}_reference")
    results = {float(c.launches[0].buffer(1, "after").view(np.float32)[0]) for c in reference.captures}
    assert len(results) > 1
    assert len(reference.captures) == ValidationOptions().noise_runs


@pytest.mark.parametrize("case", DECIDED, ids=[f"{c['candidate'][4:]}-{c['data']}" for c in DECIDED])
def test_float_sum_rewrite_verdict(request: pytest.FixtureRequest, sums: Path, case: dict) -> None:
    """Reordered sums pass; dropped or skipped elements, half precision, a missing barrier fail as a
    mismatch; zeroing the const input is input_modified, whatever the output says."""
    reference: Reference = request.getfixturevalue(f"{case['data']}_reference")
    result = check_candidate(
        reference,
        [case["candidate"], SUMS_N, "1", case["data"]],
        cwd=sums,
        options=ValidationOptions(measure=False),
    )
    assert result.failure == case["reason"], result.reason
    assert result.calibration_runs == ValidationOptions().noise_runs
    (launch,) = result.launches
    out = next(b for b in launch.buffers if b.param == 1)
    if case["reason"] != "input_modified":
        assert out.bound_use is not None and (out.bound_use <= 1.0) is (case["expected"] == "pass")
    if case["expected"] == "pass":
        assert out.noisy_elements == 1 and out.noise_max is not None and out.noise_max > 0


def test_a_single_launch_app_is_validated_and_timed(sums: Path, accordo_lib: Path) -> None:
    """The kernel is the process's first and only launch (lazy module loading): time mode times it."""
    result = validate(
        SUMS["kernel"],
        [SUMS["reference"], SUMS_N],
        ["bin/tree", SUMS_N],
        cwd=sums,
        options=ValidationOptions(runs=3, min_runs=2),
        library=accordo_lib,
    )
    assert result.passed, result.reason
    assert result.speedup is not None and result.speedup.median > 2

"""Accordo on the GPU with float sums (examples/accordo_sums): a noisy reference is calibrated on more runs,
reordered sums pass and wrong ones fail for their stated reason, and a single-launch app is validated and
timed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from accordo.validate import Reference, ValidationOptions, capture_reference, check_candidate, validate
from tests.accordo.conftest import build_example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.gpu


SUMS_DIR = EXAMPLES / "accordo_sums"
SUMS = json.loads((SUMS_DIR / "cases.json").read_text())
DECIDED = [c for c in SUMS["cases"] if not c.get("undetectable")]  # the others: examples/accordo_sums
SUMS_N = "262221"  # 2^18 + 77 elements: an atomicAdd chain long enough to be noisy, quick to capture


@pytest.fixture(scope="module")
def sums(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example(SUMS_DIR, tmp_path_factory.mktemp("sums"))


def _sums_reference(sums: Path, native_lib: Path, data: str) -> Reference:
    return capture_reference(
        SUMS["kernel"],
        [SUMS["reference"], SUMS_N, "1", data],
        cwd=sums,
        options=ValidationOptions(measure=False),
        library=native_lib,
    )


@pytest.fixture(scope="module")
def signed_reference(sums: Path, native_lib: Path) -> Reference:
    return _sums_reference(sums, native_lib, "signed")


@pytest.fixture(scope="module")
def drift_reference(sums: Path, native_lib: Path) -> Reference:
    return _sums_reference(sums, native_lib, "drift")


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


def test_a_single_launch_app_is_validated_and_timed(sums: Path, native_lib: Path) -> None:
    """The kernel is the process's first and only launch (lazy module loading): time mode times it."""
    result = validate(
        SUMS["kernel"],
        [SUMS["reference"], SUMS_N],
        ["bin/tree", SUMS_N],
        cwd=sums,
        options=ValidationOptions(runs=3, min_runs=2),
        library=native_lib,
    )
    assert result.passed, result.reason
    assert result.speedup is not None and result.speedup.median > 2

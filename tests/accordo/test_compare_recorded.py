"""Accordo's comparison on capture files recorded on an H200 (tests/fixtures/captures/block_sum/README.md):
three reference runs of examples/accordo_cases/ref and one run of every candidate, each with n = 4173."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accordo.capture import read_capture
from accordo.compare import compare_captures

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "fixtures" / "captures" / "block_sum"
CASES = {
    Path(c["candidate"]).name: c for c in json.loads((ROOT / "examples/accordo_cases/cases.json").read_text())
}
N = 4173


def refs(*names: str):
    return [
        read_capture(RECORDED / f"{name}.bin")
        for name in (names or ("reference-1", "reference-2", "reference-3"))
    ]


def compare(candidate: str, *, atol: float = 1e-6, rtol: float = 1e-5, references=None):
    return compare_captures(
        references if references is not None else refs(),
        read_capture(RECORDED / f"{candidate}.bin"),
        atol=atol,
        rtol=rtol,
    )


@pytest.mark.parametrize(
    "case",
    ["fixed_good", "droptail", "half_accum", "oob_write", "overwrite_input", "fewer_launches"],
)
def test_recorded_case_gets_its_expected_verdict(case: str) -> None:
    expected = CASES[case]
    result = compare(case)
    assert result.passed is (expected["expected"] == "pass"), result.reason
    assert result.failure == expected["reason"], result.reason


def test_the_reference_runs_agree_bit_for_bit() -> None:
    result = compare("reference-1", references=refs("reference-2", "reference-3"))
    assert result.passed and result.launches_compared == 5
    assert result.noise_max == 0.0
    output = result.launches[0].buffers[1]
    assert output.role == "output" and output.dtype == "float32" and output.max_abs_error == 0.0


def test_roles_come_from_the_signature_and_the_reference_writes() -> None:
    result = compare("fixed_good")
    for launch in result.launches:
        roles = {b.param: (b.role, b.dtype) for b in launch.buffers}
        assert roles == {0: ("input", "float32"), 1: ("output", "float32")}


def test_droptail_names_the_tail_partial_of_every_launch() -> None:
    result = compare("droptail")
    first = result.launches[0].buffers[1]
    assert first.first_mismatch == N // 256  # the tail block's partial sum
    assert first.mismatches == 1 and first.nan_inf_mismatches == 0
    assert "launch 1 of 5 (block_sum), parameter 1 (float*)" in result.reason
    assert "first at index 16" in result.reason
    # n = 173 in the fifth launch: droptail's grid is 0 blocks, the launch fails, and the capture says so
    assert result.launches[4].passed is False and result.launches[4].buffers == []


def test_half_precision_error_is_measured_and_a_loose_tolerance_accepts_it() -> None:
    strict = compare("half_accum")
    partial = strict.launches[0].buffers[1]
    assert 1e-4 < partial.max_rel_error < 2e-3
    assert partial.max_abs_error >= 0.0625  # 1/16: coarser than float's 1/64 grid
    assert compare("half_accum", rtol=2e-3).passed


def test_oob_write_lands_in_the_spare_floats() -> None:
    result = compare("oob_write")
    output = result.launches[0].buffers[1]
    assert output.first_mismatch == (N + 255) // 256  # one past the last partial
    assert "leaves unchanged" in result.reason


def test_overwritten_input_is_a_const_parameter() -> None:
    result = compare("overwrite_input")
    first = result.launches[0].buffers[0]
    assert first.role == "input" and not first.passed
    assert result.launches[0].buffers[1].passed  # the partial sums are still right
    assert "(float const*)" in result.reason


def test_reference_spread_widens_the_bounds_per_element() -> None:
    """A reference run in half precision spreads the references by up to 1/16 at most elements: half_accum
    then falls inside the widened bounds, but droptail's missing tail partial (about 100) still does not."""
    assert compare("half_accum").failure == "mismatch"
    noisy = refs("reference-1", "reference-2", "half_accum")
    widened = compare("half_accum", references=noisy)
    assert widened.passed
    assert 0.0 < widened.noise_max <= 0.125
    assert compare("droptail", references=noisy).failure == "mismatch"


def test_crashed_candidate_is_a_launch_count_failure_at_capture_level() -> None:
    segfault = read_capture(RECORDED / "segfault.bin")
    assert not segfault.complete and len(segfault.launches) == 1
    assert compare("segfault").failure == "launch_count"

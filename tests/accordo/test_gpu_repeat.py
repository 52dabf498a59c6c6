"""A kernel launched again and again on one output (examples/accordo_repeat: row_norm, 10 launches, the
norms buffer never cleared), rewritten to add in another order: correct at every launch, every time, in
CUDA C++ and in Triton; a wrong rewrite of it still fails. Before each launch was judged on the
reference's own inputs, every such rewrite failed from its second launch as input_mismatch."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accordo.validate import Reference, ValidationOptions, capture_reference, check_candidate
from tests.accordo.conftest import build_example

ROOT = Path(__file__).resolve().parents[2]
REPEAT = ROOT / "examples" / "accordo_repeat"
CUDA_REPEATS = 20
TRITON_REPEATS = 5  # each run starts Python and compiles the kernel: a few seconds

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def repeat(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example(REPEAT, tmp_path_factory.mktemp("repeat"))


@pytest.fixture(scope="module")
def cuda_reference(repeat: Path, accordo_lib: Path) -> Reference:
    return capture_reference(
        "row_norm", ["bin/ref"], cwd=repeat, options=ValidationOptions(measure=False), library=accordo_lib
    )


def test_a_reordered_cuda_rewrite_passes_at_every_launch_every_time(
    cuda_reference: Reference, repeat: Path
) -> None:
    results = [
        check_candidate(cuda_reference, ["bin/warp"], cwd=repeat, options=ValidationOptions(measure=False))
        for _ in range(CUDA_REPEATS)
    ]
    assert [r.failure for r in results] == [None] * CUDA_REPEATS, results[0].reason
    for result in results:
        assert result.launches_compared == 10
        outputs = [b for launch in result.launches for b in launch.buffers if b.param == 1]
        assert [b.role for b in outputs] == ["output"] * 10
        # another order of additions: not the reference's bits, within the rounding bound
        assert all(b.max_abs_error is not None and b.max_abs_error > 0 for b in outputs)
        assert all(b.bound_use is not None and 0 < b.bound_use <= 1 for b in outputs)


def test_a_wrong_rewrite_of_the_repeated_kernel_still_fails(cuda_reference: Reference, repeat: Path) -> None:
    result = check_candidate(
        cuda_reference, ["bin/skip_last"], cwd=repeat, options=ValidationOptions(measure=False)
    )
    assert result.failure == "mismatch", result.reason
    assert result.reason is not None and result.reason.startswith("launch 1 of 10 (row_norm)")
    assert all(not launch.passed for launch in result.launches)


def test_a_triton_rewrite_with_another_block_passes_at_every_launch(repeat: Path, accordo_lib: Path) -> None:
    options = ValidationOptions(measure=False)
    reference = capture_reference(
        "row_norm",
        [sys.executable, "row_norm.py", "16"],
        cwd=repeat,
        options=options,
        library=accordo_lib,
    )
    for _ in range(TRITON_REPEATS):
        result = check_candidate(
            reference, [sys.executable, "row_norm.py", "256"], cwd=repeat, options=options
        )
        assert result.passed, result.reason
        assert result.launches_compared == 10
        outputs = [b for launch in result.launches for b in launch.buffers if b.role == "output"]
        assert len(outputs) == 10 and any((b.max_abs_error or 0) > 0 for b in outputs)

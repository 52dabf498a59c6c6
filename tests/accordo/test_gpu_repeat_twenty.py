"""The row norm launched 10 times on one output (examples/accordo_repeat), rewritten in CUDA C++ to add in
another order (bin/warp), judged 20 times: accepted every time, each launch on the reference's own inputs.
(A part of the GPU record of its own: the rest of tests/accordo/test_gpu_repeat.py takes as long.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from accordo.validate import Reference, ValidationOptions, check_candidate
from tests.support.repeat_example import PASSED, build_repeat, capture_cuda_reference

CUDA_REPEATS = 20

# 20 judgements of about 15 s each (five runs of the program apiece): more than the default 300 s
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(540)]


@pytest.fixture(scope="module")
def repeat(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repeat(tmp_path_factory.mktemp("repeat"))


@pytest.fixture(scope="module")
def cuda_reference(repeat: Path, native_lib: Path) -> Reference:
    return capture_cuda_reference(repeat, native_lib)


def test_a_reordered_cuda_rewrite_passes_at_every_launch_every_time(
    cuda_reference: Reference, repeat: Path
) -> None:
    results = [
        check_candidate(cuda_reference, ["bin/warp"], cwd=repeat, options=ValidationOptions(measure=False))
        for _ in range(CUDA_REPEATS)
    ]
    assert [r.failure for r in results] == [None] * CUDA_REPEATS, results[0].reason
    for result in results:
        assert [(c.name, c.outcome) for c in result.checks] == [(name, "passed") for name in PASSED]
        assert result.launches_compared == 10
        outputs = [b for launch in result.launches for b in launch.buffers if b.param == 1]
        assert [b.role for b in outputs] == ["output"] * 10
        # another order of additions: not the reference's bits, within the rounding bound
        assert all(b.max_abs_error is not None and b.max_abs_error > 0 for b in outputs)
        assert all(b.bound_use is not None and 0 < b.bound_use <= 1 for b in outputs)

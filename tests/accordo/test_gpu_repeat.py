"""A kernel launched again and again on one output (examples/accordo_repeat: row_norm, 10 launches, the norms
buffer never cleared), rewritten to add in another order: correct at every launch, every time, in CUDA C++
(20 times: tests/accordo/test_gpu_repeat_twenty.py) and in Triton, also with its outputs filled with NaN
and on fresh inputs; a wrong rewrite of it still fails. Before each launch was judged on the reference's
own inputs, every such rewrite failed from its second launch as input_mismatch. Three cheats that pass both
comparisons (work skipped when the output did not change, an answer left in memory, a kernel that
regenerates the program's one input) fail the probe meant for them (accordo/probes.py). A correct rewrite
also passes the launch pattern and its kernel, replayed alone on the reference's inputs
(accordo/replay.py), writes the reference's outputs."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from accordo.validate import Reference, ValidationOptions, capture_reference, check_candidate
from tests.support.repeat_example import PASSED, build_repeat, capture_cuda_reference

TRITON_REPEATS = 5  # each run starts Python and compiles the kernel: a few seconds

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def repeat(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_repeat(tmp_path_factory.mktemp("repeat"))


@pytest.fixture(scope="module")
def cuda_reference(repeat: Path, native_lib: Path) -> Reference:
    return capture_cuda_reference(repeat, native_lib)


def test_the_reference_runs_under_both_probes(cuda_reference: Reference) -> None:
    assert [(p.probe.name, p.skipped, len(p.captures)) for p in cuda_reference.probes] == [
        ("prefilled_nan", None, 1),
        ("fresh_inputs", None, 1),
    ]


CHEATS = [
    ("skip_same_out", "prefilled_nan"),  # work skipped when the output pointer did not change
    ("lazy", "prefilled_nan"),  # memory that happens to hold the answer
    ("regen", "fresh_inputs"),  # tuned to the program's one input
]


@pytest.mark.parametrize(("case", "check"), CHEATS)
def test_a_cheat_that_passes_both_comparisons_fails_its_probe(
    cuda_reference: Reference, repeat: Path, case: str, check: str
) -> None:
    options = ValidationOptions(measure=False)
    unprobed = dataclasses.replace(cuda_reference, probes=())
    without = check_candidate(unprobed, [f"bin/{case}"], cwd=repeat, options=options)
    assert without.passed, f"{case} should pass the comparisons alone: {without.reason}"
    result = check_candidate(cuda_reference, [f"bin/{case}"], cwd=repeat, options=options)
    assert not result.passed
    assert result.failure == "mismatch", result.reason
    outcomes = [(c.name, c.outcome) for c in result.checks]
    assert outcomes == [(name, "passed") for name in PASSED[: PASSED.index(check)]] + [(check, "failed")]
    assert result.reason is not None and result.reason.startswith(
        "run with" if check == "prefilled_nan" else "run on"
    )


def test_a_wrong_rewrite_of_the_repeated_kernel_still_fails(cuda_reference: Reference, repeat: Path) -> None:
    result = check_candidate(
        cuda_reference, ["bin/skip_last"], cwd=repeat, options=ValidationOptions(measure=False)
    )
    assert result.failure == "mismatch", result.reason
    assert result.reason is not None and result.reason.startswith("launch 1 of 10 (row_norm)")
    assert all(not launch.passed for launch in result.launches)


def test_a_triton_rewrite_with_another_block_passes_at_every_launch(repeat: Path, native_lib: Path) -> None:
    options = ValidationOptions(measure=False, replay=False)  # the replay part replays Triton captures
    reference = capture_reference(
        "row_norm",
        [sys.executable, "row_norm.py", "16"],
        cwd=repeat,
        options=options,
        library=native_lib,
    )
    for _ in range(TRITON_REPEATS):
        result = check_candidate(
            reference, [sys.executable, "row_norm.py", "256"], cwd=repeat, options=options
        )
        assert result.passed, result.reason
        assert [(c.name, c.outcome) for c in result.checks] == [(name, "passed") for name in PASSED[:-1]]
        assert result.launches_compared == 10
        outputs = [b for launch in result.launches for b in launch.buffers if b.role == "output"]
        assert len(outputs) == 10 and any((b.max_abs_error or 0) > 0 for b in outputs)

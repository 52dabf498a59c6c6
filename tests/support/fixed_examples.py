"""The fixed version of each bundled example validated against its original, for the GPU tests of the judge
(tests/accordo/test_gpu_fixed_examples_*.py): the examples in three shards, so that each shard's part of
the GPU record fits one device call beside the others."""

from __future__ import annotations

import json
from pathlib import Path

from accordo.validate import ValidationOptions, validate
from tests.accordo.conftest import build_example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MANIFEST: list[dict] = json.loads((EXAMPLES / "examples.json").read_text())
# AoS to SoA is a data-layout change, not a kernel rewrite: the kernel is given other input bytes. (The
# fixed tile_sums, which adds each tile up in another order into an output its next launch starts from,
# failed as input_mismatch until each launch was judged on the reference's own inputs.)
EXAMPLE_FAILURE = {"aos_field": "input_mismatch"}
EXAMPLE_KERNELS = {"tile_sums": 6}
# The probes that cannot run on an example (accordo/probes.py), as measured on an H200 at dafc612: kernels
# that add into their output (atomics) overwrite no output whole, so nothing is filled with NaN; the
# histogram program checks its own counts and exits 1 when its bins start from garbage, so neither probe
# has a reference to compare with. Every other example runs and passes both.
PROBES_SKIPPED = {
    "atomic_reduction": {"prefilled_nan"},
    "scatter_atomic": {"prefilled_nan"},
    "triton_atomic": {"prefilled_nan"},
    "histogram_atomic": {"prefilled_nan", "fresh_inputs"},
}


def shard(name: str) -> list[dict]:
    """The examples of shard ``name``: ``python`` (Triton and PyTorch, no build), or every other compiled
    one (``cuda_a``: the 1st, 3rd, ...; ``cuda_b``: the 2nd, 4th, ...)."""
    python = [e for e in MANIFEST if e["build"] is None]
    compiled = [e for e in MANIFEST if e["build"] is not None]
    shards = {"python": python, "cuda_a": compiled[0::2], "cuda_b": compiled[1::2]}
    return shards[name]


def build_examples(examples: list[dict], root: Path) -> Path:
    for example in examples:
        build_example(EXAMPLES / example["name"], root)
    return root


def check_fixed_example(example: dict, built: Path, library: Path) -> None:
    result = validate(
        example["kernel"],
        [f"./{example['app']}", "3"],
        [f"./{example['fixed_app']}", "3"],
        cwd=built / example["name"],
        options=ValidationOptions(measure=False),
        library=library,
    )
    expected = EXAMPLE_FAILURE.get(example["name"])
    assert result.failure == expected, result.reason
    if expected is None:  # 3 iterations of each kernel the name matches (tile_sums: 6 instantiations)
        assert result.launches_compared == 3 * EXAMPLE_KERNELS.get(example["name"], 1)
        outcomes = {c.name: c.outcome for c in result.checks}
        skipped = PROBES_SKIPPED.get(example["name"], set())
        expected_outcomes = {
            name: "skipped" if name in skipped else "passed"
            for name in (
                "end_to_end",
                "isolated",
                "prefilled_nan",
                "fresh_inputs",
                "launch_pattern",
                "replay",
            )
        }
        assert outcomes == expected_outcomes, result.checks

"""Accordo on the GPU: the fixed version of every bundled example passes against its original (with the
probes: outputs filled with NaN, fresh inputs), except the data-layout change of aos_field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accordo.validate import ValidationOptions, validate
from tests.accordo.conftest import build_example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MANIFEST = json.loads((EXAMPLES / "examples.json").read_text())
# AoS to SoA is a data-layout change, not a kernel rewrite: the kernel is given other input bytes. (The
# fixed tile_sums, which adds each tile up in another order into an output its next launch starts from,
# failed as input_mismatch until each launch was judged on the reference's own inputs.)
EXAMPLE_FAILURE = {"aos_field": "input_mismatch"}
EXAMPLE_KERNELS = {"tile_sums": 6}

pytestmark = pytest.mark.gpu


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

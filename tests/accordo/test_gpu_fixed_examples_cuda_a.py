"""Accordo on the GPU: the fixed version of each bundled example (the compiled examples, 1st, 3rd, ...)
passes against its original, with the probes (outputs filled with NaN, fresh inputs), except aos_field's
data-layout change (tests/support/fixed_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fixed_examples import build_examples, check_fixed_example, shard

SHARD = shard("cuda_a")

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def built(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_examples(SHARD, tmp_path_factory.mktemp("examples"))


@pytest.mark.parametrize("example", SHARD, ids=[e["name"] for e in SHARD])
def test_fixed_example_passes_against_original(built: Path, native_lib: Path, example: dict) -> None:
    check_fixed_example(example, built, native_lib)

"""examples/accordo_repeat built once per test module, and its CUDA reference captured: the two GPU test
files of the repeated row norm (tests/accordo/test_gpu_repeat.py, test_gpu_repeat_twenty.py) share them."""

from __future__ import annotations

from pathlib import Path

from accordo.validate import Reference, ValidationOptions, capture_reference
from tests.accordo.conftest import build_example

ROOT = Path(__file__).resolve().parents[2]
REPEAT = ROOT / "examples" / "accordo_repeat"
# the checks a correct rewrite passes, in the order they run
PASSED = ["end_to_end", "isolated", "prefilled_nan", "fresh_inputs", "launch_pattern", "replay"]


def build_repeat(into: Path) -> Path:
    return build_example(REPEAT, into)


def capture_cuda_reference(folder: Path, library: Path) -> Reference:
    return capture_reference(
        "row_norm", ["bin/ref"], cwd=folder, options=ValidationOptions(measure=False), library=library
    )

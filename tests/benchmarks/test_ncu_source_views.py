"""The CUDA+SASS page alone gives every instruction once, with the counters the SASS page gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.ncu.source import (
    instructions_from_cuda_sass,
    parse_cuda_sass_view,
    parse_sass_view,
)
from intelliperf.gpu.nvidia.metrics import sass_opcode
from tests.recorded import RECORDED

BOTH_VIEWS = sorted(
    folder
    for folder in [*(RECORDED / "source_views").iterdir(), RECORDED / "tile_sums" / "demangled"]
    if (folder / "source_sass.csv").is_file()
)


@pytest.mark.parametrize("folder", BOTH_VIEWS, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_cuda_sass_page_gives_the_sass_pages_instructions(folder: Path) -> None:
    expected = parse_sass_view((folder / "source_sass.csv").read_text())
    derived = instructions_from_cuda_sass((folder / "source_cuda_sass.csv").read_text())
    assert expected and derived.keys() == expected.keys()
    for kernel, instructions in expected.items():
        assert derived[kernel] == instructions, kernel


def test_an_inlined_instruction_listed_twice_is_counted_once() -> None:
    text = (RECORDED / "source_views" / "atomic_reduction" / "source_cuda_sass.csv").read_text()
    kernel = next(name for name in parse_cuda_sass_view(text) if "atomic_sum" in name)
    listed = [a for line in parse_cuda_sass_view(text)[kernel] for a in line.addresses]
    assert len(listed) > len(set(listed))  # the inlined atomicAdd's first instruction, under two lines
    instructions = instructions_from_cuda_sass(text)[kernel]
    assert sorted(instructions) == sorted(set(listed))
    atomics = [i for i in instructions.values() if sass_opcode(i.assembly).startswith(("RED", "ATOM"))]
    assert atomics and all(i.metrics["Instructions Executed"] > 0 for i in atomics)

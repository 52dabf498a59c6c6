"""The ncu export parsers on real exports, including the quirks they work around."""

from __future__ import annotations

import pytest

from benchmarks.ncu.kernel_names import same_kernel
from benchmarks.ncu.pages import parse_raw_csv, to_base_unit
from benchmarks.ncu.source import join_source_views, parse_cuda_sass_view, parse_sass_view
from intelliperf.contract.kernel_names import canonical_signature
from intelliperf.errors import ProfileError
from intelliperf.gpu.nvidia.metrics import sass_opcode
from tests.recorded import RECORDED

TRANSPOSE = RECORDED / "transpose_bank" / "original"
# Both source pages of one report, from before the counter pass stopped exporting the SASS page.
TRANSPOSE_VIEWS = RECORDED / "source_views" / "transpose_bank"
HISTOGRAM_VIEWS = RECORDED / "source_views" / "histogram_atomic"
ATOMIC_VIEWS = RECORDED / "source_views" / "atomic_reduction"


def test_raw_page_gives_every_profiled_kernel_in_base_units() -> None:
    kernels = parse_raw_csv((TRANSPOSE / "raw.csv").read_text())
    assert [k.name for k in kernels] == ["_Z15transpose_tiledPKfPfii"]  # init_matrix: under 5%, not profiled
    main = kernels[0].metrics
    assert 50_000 < main["gpu__time_duration.sum"] < 200_000  # ns: a ~80 us transpose
    assert main["device__attribute_multiprocessor_count"] == 132
    assert main["launch__grid_size"] == 16384  # "16,384" in the export
    assert kernels[0].text["device__attribute_display_name"] == "NVIDIA H100 80GB HBM3"


def test_scaled_units_are_normalised() -> None:
    assert to_base_unit(29.47, "ms") == pytest.approx(29.47e6)
    assert to_base_unit(1.5, "Mbyte") == 1.5e6
    assert to_base_unit(3.0, "sector") == 3.0


@pytest.mark.parametrize("text", ["", "==ERROR== something\n", '"ID","Process ID"\n"","",\n'])
def test_raw_page_without_kernels_is_a_profile_error(text: str) -> None:
    with pytest.raises(ProfileError):
        parse_raw_csv(text)


def test_cuda_sass_view_lists_an_inlined_instruction_under_several_lines() -> None:
    """Why kernel totals are summed over the SASS view: here one RED sits under two lines."""
    structure = parse_cuda_sass_view((ATOMIC_VIEWS / "source_cuda_sass.csv").read_text())
    lines = next(v for k, v in structure.items() if k.startswith("atomic_sum"))
    owners: dict[str, list[int]] = {}
    for line in lines:
        for address in line.addresses:
            owners.setdefault(address, []).append(line.line)
    instructions = parse_sass_view((ATOMIC_VIEWS / "source_sass.csv").read_text())
    kernel = next(v for k, v in instructions.items() if k.startswith("atomic_sum"))
    red = next(a for a, i in kernel.items() if sass_opcode(i.assembly).startswith("RED"))
    assert len(owners[red]) >= 2


def test_sass_view_instructions_carry_their_metrics() -> None:
    views = parse_sass_view((TRANSPOSE_VIEWS / "source_sass.csv").read_text())
    transpose = next(v for k, v in views.items() if k.startswith("transpose_tiled"))
    shared_loads = [i for i in transpose.values() if sass_opcode(i.assembly) == "LDS"]
    assert shared_loads
    assert sum(i.metrics.get("L1 Wavefronts Shared Excessive", 0) for i in shared_loads) > 1e7


def test_source_rows_sum_the_instructions_of_each_line() -> None:
    structure = parse_cuda_sass_view((TRANSPOSE_VIEWS / "source_cuda_sass.csv").read_text())
    instructions = parse_sass_view((TRANSPOSE_VIEWS / "source_sass.csv").read_text())
    rows = join_source_views(structure, instructions)
    transpose = next(v for k, v in rows.items() if k.startswith("transpose_tiled"))
    by_line = {r.line: r for r in transpose}
    assert "tile[threadIdx.x][threadIdx.y + j]" in by_line[59].code
    assert by_line[59].get("L1 Wavefronts Shared Excessive") > 1e7
    assert by_line[50].get("L1 Wavefronts Shared Excessive") == 0


def test_inlined_atomic_is_attributed_to_its_call_site() -> None:
    structure = parse_cuda_sass_view((HISTOGRAM_VIEWS / "source_cuda_sass.csv").read_text())
    rows = join_source_views(structure, parse_sass_view((HISTOGRAM_VIEWS / "source_sass.csv").read_text()))
    kernel = next(v for k, v in rows.items() if k.startswith("histogram_bins"))
    atomics = [r for r in kernel if any(sass_opcode(i.assembly).startswith("RED") for i in r.instructions)]
    user_lines = [(r.file.rsplit("/", 1)[-1], r.line) for r in atomics if r.file.endswith("histogram.cu")]
    assert user_lines == [("histogram.cu", 52)]


def test_kernel_names_match_across_demanglers() -> None:
    ours = "transpose_tiled(float const*, float*, int, int)"
    assert same_kernel(
        "transpose_tiled(const float *, float *, int, int)", "_Z15transpose_tiledPKfPfii", ours
    )
    assert same_kernel("_Z15transpose_tiledPKfPfii", "_Z15transpose_tiledPKfPfii", ours)
    assert not same_kernel("transpose_tiled(const float *, float *, int)", "_Z1x", ours)
    assert not same_kernel("transpose_naive(const float *, float *, int, int)", "_Z1x", ours)
    assert canonical_signature("void ns::scale<float, 4>(float *, int)") == (
        "ns::scale<float,4>",
        (("*", "float"), ("int",)),
    )

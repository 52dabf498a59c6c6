"""Kernels matched to Nsight Compute's pages (benchmarks.ncu) on real recordings of templated, namespaced and
lambda kernels (examples/tile_sums, H100, ncu 2025.3), with the pages exported by mangled name (what the ncu
counter pass asked for) and by ncu's own demangling (older recordings); and kernels without line info."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.ncu.kernel_names import same_kernel
from benchmarks.ncu.pages import csv_rows
from benchmarks.ncu.profiles import build_profiles
from benchmarks.ncu.source import kernels_without_line_info
from formulas.selection import formulas_for
from intelliperf.contract import RankedKernel
from intelliperf.contract.kernel_names import function_name
from intelliperf.contract.profile import Column
from intelliperf.gpu.backend import rank_kernels
from profiler.trace import read_trace, summarize
from tests.recorded import EXAMPLES, RECORDED

TILE_SUMS = RECORDED / "tile_sums"
NO_LINES = RECORDED / "transpose_bank" / "nolineinfo_pages"


def ranked_in(folder: Path) -> list[RankedKernel]:
    return rank_kernels(summarize(read_trace(folder / "trace.jsonl")))


def profiles_of(folder: Path):
    ranked = ranked_in(folder)
    raw, cuda_sass = ((folder / name).read_text() for name in ("raw.csv", "source_cuda_sass.csv"))
    sass = (folder / "source_sass.csv").read_text() if (folder / "source_sass.csv").is_file() else None
    return ranked, build_profiles(raw, cuda_sass, sass, ranked, arch="sm_90", resolve=EXAMPLES / "tile_sums")


@pytest.mark.parametrize("pages", ["original", "demangled"])
def test_every_templated_namespaced_and_lambda_kernel_gets_its_lines_and_counters(pages: str) -> None:
    ranked, profiles = profiles_of(TILE_SUMS / pages)
    assert len(ranked) == 9
    for kernel in ranked:
        profile = profiles.get(kernel.name)
        if profile is None:  # `original` was recorded by the engine: kernels under 5% were not profiled
            assert pages == "original" and kernel.share < 0.05, kernel.demangled
            continue
        assert profile.source_page and profile.instructions, kernel.demangled
        lines = {row.line for row in profile.source if row.file.endswith("tile_sums.cu")}
        assert lines, f"{kernel.demangled}: no source lines"
    by_name = {k.demangled: profiles[k.name] for k in ranked if k.name in profiles}
    tile32 = by_name["void geom::tile_sums<32>(float2 const*, float*, int)"]
    marker = next(
        n
        for n, text in enumerate((EXAMPLES / "tile_sums" / "tile_sums.cu").read_text().splitlines(), 1)
        if "intelliperf: memoryAccess" in text
    )
    assert any(r.line == marker and r.get(Column.GLOBAL_SECTORS_EXCESS) > 0 for r in tile32.source)


def test_the_counter_pass_pages_name_kernels_by_their_mangled_names() -> None:
    raw = csv_rows((TILE_SUMS / "original" / "raw.csv").read_text())
    column = raw[0].index("Kernel Name")
    assert {row[column] for row in raw[2:]} >= {
        "_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi",
        "_Z14for_each_indexIZ4mainEUliE_EviT_",
    }


def test_ncus_demangling_is_matched_to_the_tracers() -> None:
    ours = "void geom::tile_sums<32>(float2 const*, float*, int)"
    mangled = "_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi"
    assert same_kernel("void geom::tile_sums<(int)32>(const float2 *, float *, int)", mangled, ours)
    assert same_kernel("void geom::tile_sums<32>(const float2 *, float *, int)", mangled, ours)
    assert not same_kernel("void geom::tile_sums<(int)16>(const float2 *, float *, int)", mangled, ours)
    lambda_ours = "void for_each_index<main::{lambda(int)#1}>(int, main::{lambda(int)#1})"
    assert same_kernel("void for_each_index<main::[lambda(int) (instance 1)]>(int, T1)", "_Z1x", lambda_ours)
    assert not same_kernel(
        "void for_each_index<main::[lambda(int) (instance 2)]>(int, T1)", "_Z1x", lambda_ours
    )
    nested = "geom::detail::normalize(float const*, float*, int, float)"
    assert same_kernel("detail::normalize(const float *, float *, int, float)", "_Z1x", nested)
    assert not same_kernel("other::normalize(const float *, float *, int, float)", "_Z1x", nested)
    assert same_kernel("void k<(unsigned int)3>(float *)", "_Z1x", "void k<3u>(float*)")
    assert function_name(ours) == "tile_sums" and function_name(lambda_ours) == "for_each_index"


@pytest.mark.parametrize(
    ("page", "named"),
    [
        ("source_cuda_sass_mangled.csv", "_Z15transpose_tiledPKfPfii"),
        ("source_cuda_sass_demangled.csv", "transpose_tiled(const float *, float *, int, int)"),
    ],
)
def test_a_kernel_built_without_line_info_has_its_instructions_and_no_line_on_real_pages(
    page: str, named: str
) -> None:
    """ncu leaves such a kernel out of the CUDA view and only warns; recorded from transpose_nolineinfo. The
    SASS page gives its instructions, and the warning names it as on the page: what a diagnosis refuses
    with exit 8 (no profiled kernel has a line)."""
    text = (NO_LINES / page).read_text()
    assert kernels_without_line_info(text) == {named}
    transpose = RECORDED / "transpose_bank" / "original"
    ranked = ranked_in(transpose)
    profiles = build_profiles(
        (transpose / "raw.csv").read_text(),
        text,
        (RECORDED / "source_views" / "transpose_bank" / "source_sass.csv").read_text(),
        ranked,
        arch="sm_90",
        resolve=EXAMPLES / "transpose_bank",
    )
    assert profiles
    for profile in profiles.values():
        assert profile.source_page and profile.instructions and not any(r.line > 0 for r in profile.source)


def test_a_kernel_the_source_page_does_not_name_has_no_lines_and_no_instructions() -> None:
    """The page names another instantiation: the kernel keeps its kernel-level metrics, and the formulas that
    need per-instruction counters it lacks are undecided, never 'none found'."""
    folder = TILE_SUMS / "original"
    page = (folder / "source_cuda_sass.csv").read_text()
    ranked = ranked_in(folder)
    profiles = build_profiles(
        (folder / "raw.csv").read_text(),
        page.replace("_ZN4geom9tile_sumsILi32", "_ZN4geom9tile_sumsILi64"),
        None,
        ranked,
        arch="sm_90",
        resolve=EXAMPLES / "tile_sums",
    )
    tile32 = profiles["_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi"]
    assert not tile32.source_page and not tile32.source and not tile32.instructions
    assert tile32.metrics
    verdicts = [formula.evaluate(tile32) for formula in formulas_for("auto")]
    assert not any(d.present for d in verdicts)
    assert {d.formula for d in verdicts if not d.decided} >= {"memoryAccess", "bankConflict"}

"""Kernels matched to Nsight Compute's pages on real recordings of templated, namespaced and lambda kernels
(examples/tile_sums, H100, ncu 2025.3), with the pages exported by mangled name (what the counter pass asks
for) and by ncu's own demangling (older recordings); and kernels without line info."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from intelliperf.contract import Application, JobSpec
from intelliperf.contract.profile import Column
from intelliperf.engine.diagnose import run_diagnosis
from intelliperf.errors import NoLineInfoError
from intelliperf.gpu.backend import rank_kernels
from intelliperf.gpu.nvidia.kernel_names import function_name, same_kernel
from intelliperf.gpu.nvidia.ncu import csv_rows
from intelliperf.gpu.nvidia.ncu_source import kernels_without_line_info
from intelliperf.gpu.nvidia.profiles import build_profiles
from intelliperf.gpu.replay import ReplayBackend
from profiler.trace import read_trace, summarize
from tests.recorded import EXAMPLES, RECORDED

TILE_SUMS = RECORDED / "tile_sums"
NO_LINES = RECORDED / "transpose_bank" / "nolineinfo_pages"


def profiles_of(folder: Path):
    ranked = rank_kernels(summarize(read_trace(folder / "trace.jsonl")))
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


def ncu_recording(folder: Path, copy: Path) -> Path:
    """A copy of a recorded example with only Nsight Compute's pages: without the CUPTI counter pass's files,
    which a replay would read first."""
    shutil.copytree(folder, copy)
    for path in [*copy.glob("counters-*.jsonl"), *copy.glob("sass-*.txt")]:
        path.unlink()
    return copy


def test_a_cupti_recording_of_a_kernel_without_line_info_is_exit_8(tmp_path: Path) -> None:
    """The same listing without nvdisasm's line comments, as a cubin built without -lineinfo gives it."""
    recording = tmp_path / "noline"
    shutil.copytree(RECORDED / "transpose_bank" / "original", recording)
    for listing in recording.glob("sass-*.txt"):
        listing.write_text(
            "\n".join(line for line in listing.read_text().splitlines() if "//## File" not in line)
        )
    spec = JobSpec(applications=[Application(command=["./app"])], formula="diagnoseOnly")
    with pytest.raises(NoLineInfoError):
        run_diagnosis(spec, backend=ReplayBackend(recording), project=EXAMPLES / "transpose_bank")


def test_a_kernel_the_listing_does_not_name_is_diagnosed_without_lines_and_said_so(tmp_path: Path) -> None:
    """A CUPTI recording whose disassembly has no function of the counted kernel's name: its instructions
    are counted but have no text or line, which the report says. The counts still decide (the kernel's
    excess global sectors are measured whatever its instructions' text), with no line to point at."""
    recording = tmp_path / "unnamed"
    shutil.copytree(TILE_SUMS / "original", recording)
    for listing in recording.glob("sass-*.txt"):
        listing.write_text(listing.read_text().replace("_ZN4geom9tile_sumsILi32", "_ZN4geom9tile_sumsILi64"))
    spec = JobSpec(applications=[Application(command=["./bin/tile_sums"])], formula="diagnoseOnly")
    report = run_diagnosis(spec, backend=ReplayBackend(recording), project=EXAMPLES / "tile_sums")
    assert any("CUPTI's source page names no kernel that matches it" in w for w in report.warnings)
    tile32 = {d.formula: d for d in report.diagnoses if d.kernel == "_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi"}
    assert tile32["memoryAccess"].present and all(not d.locations for d in tile32.values())


@pytest.mark.parametrize(
    ("page", "named"),
    [
        ("source_cuda_sass_mangled.csv", "_Z15transpose_tiledPKfPfii"),
        ("source_cuda_sass_demangled.csv", "transpose_tiled(const float *, float *, int, int)"),
    ],
)
def test_a_kernel_built_without_line_info_is_exit_8_on_real_pages(
    page: str, named: str, tmp_path: Path
) -> None:
    """ncu leaves such a kernel out of the CUDA view and only warns; recorded from transpose_nolineinfo."""
    text = (NO_LINES / page).read_text()
    assert kernels_without_line_info(text) == {named}
    recording = ncu_recording(RECORDED / "transpose_bank" / "original", tmp_path / "noline")
    (recording / "source_cuda_sass.csv").write_text(text)
    # what the counter pass then exports as well: the SASS page of the same kernel
    shutil.copy(RECORDED / "source_views" / "transpose_bank" / "source_sass.csv", recording)
    spec = JobSpec(applications=[Application(command=["./app"])], formula="diagnoseOnly")
    with pytest.raises(NoLineInfoError):
        run_diagnosis(spec, backend=ReplayBackend(recording), project=EXAMPLES / "transpose_bank")


def test_a_kernel_the_source_page_does_not_name_is_diagnosed_without_lines_and_said_so(
    tmp_path: Path,
) -> None:
    """Not exit 8 (the binary has line info; the page just does not name the kernel), and a formula that
    needs per-instruction counters it lacks is undecided, never 'none found'."""
    recording = ncu_recording(TILE_SUMS / "original", tmp_path / "unnamed")
    page = recording / "source_cuda_sass.csv"
    page.write_text(page.read_text().replace("_ZN4geom9tile_sumsILi32", "_ZN4geom9tile_sumsILi64"))
    (recording / "source_sass.csv").unlink(missing_ok=True)
    spec = JobSpec(applications=[Application(command=["./bin/tile_sums"])], formula="diagnoseOnly")
    report = run_diagnosis(spec, backend=ReplayBackend(recording), project=EXAMPLES / "tile_sums")
    assert any("source page names no kernel that matches it" in w for w in report.warnings)
    tile32 = [d for d in report.diagnoses if d.kernel == "_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi"]
    assert tile32 and not any(d.present for d in tile32)
    assert {d.formula for d in tile32 if not d.decided} >= {"memoryAccess", "bankConflict"}

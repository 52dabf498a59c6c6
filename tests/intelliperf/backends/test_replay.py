"""The replay reads one recording, the CUPTI counter pass's: a folder of Nsight Compute's pages (recorded
before 2026-11-27) is refused with what it lacks, and a CUPTI recording whose listing lacks lines or names
no counted kernel is diagnosed as such."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from intelliperf.contract import Application, JobSpec
from intelliperf.engine.diagnose import run_diagnosis
from intelliperf.errors import NoLineInfoError, ProfileError
from intelliperf.gpu.replay import ReplayBackend
from tests.recorded import EXAMPLES, RECORDED

TRANSPOSE = RECORDED / "transpose_bank" / "original"
TILE_SUMS = RECORDED / "tile_sums" / "original"


def copied(names: tuple[str, ...], source: Path, folder: Path) -> Path:
    folder.mkdir()
    for name in names:
        shutil.copy(source / name, folder)
    return folder


def test_a_folder_of_nsight_computes_pages_is_refused_as_no_cupti_recording(tmp_path: Path) -> None:
    """The pages an old recording held, with its trace: the raw page and the profiling run's source page."""
    folder = copied(
        ("trace.jsonl", "device.json", "raw.csv", "source_cuda_sass.csv"), TRANSPOSE, tmp_path / "ncu"
    )
    with pytest.raises(ProfileError) as refused:
        ReplayBackend(folder)
    message = refused.value.message
    assert (
        f"{folder} is not a recorded profile: it has no counters-*.jsonl, so it is not a CUPTI recording"
        in (message)
    )
    assert "it holds Nsight Compute's raw.csv and source_cuda_sass.csv" in message
    assert "Nsight Compute recordings are no longer read" in message


def test_source_pages_alone_are_refused_with_both_missing_files_named(tmp_path: Path) -> None:
    views = RECORDED / "source_views" / "transpose_bank"
    folder = copied(("source_cuda_sass.csv", "source_sass.csv"), views, tmp_path / "pages")
    with pytest.raises(ProfileError) as refused:
        ReplayBackend(folder)
    message = refused.value.message
    assert "it has no trace.jsonl and no counters-*.jsonl, so it is not a CUPTI recording" in message
    assert "it holds Nsight Compute's source_cuda_sass.csv" in message
    assert "Nsight Compute recordings are no longer read" in message


def test_a_folder_without_counters_or_pages_says_old_recordings_are_not_read(tmp_path: Path) -> None:
    folder = copied(("trace.jsonl",), TRANSPOSE, tmp_path / "trace_only")
    with pytest.raises(
        ProfileError, match=r"not a CUPTI recording .*Nsight Compute recordings are no longer read"
    ):
        ReplayBackend(folder)


def test_every_recorded_folder_with_a_trace_replays_but_the_one_of_nsight_computes_pages() -> None:
    """Every folder a diagnosis replays is a CUPTI recording; tile_sums/demangled, pages printed with ncu's
    demangled names, is a reference for benchmarks.ncu's tests only."""
    refused = []
    for trace in sorted(RECORDED.rglob("trace.jsonl")):
        try:
            ReplayBackend(trace.parent)
        except ProfileError as error:
            assert "Nsight Compute recordings are no longer read" in error.message
            refused.append(trace.parent.relative_to(RECORDED).as_posix())
    assert refused == ["tile_sums/demangled"]


def test_a_cupti_recording_of_a_kernel_without_line_info_is_exit_8(tmp_path: Path) -> None:
    """The same listing without nvdisasm's line comments, as a cubin built without -lineinfo gives it."""
    recording = tmp_path / "noline"
    shutil.copytree(TRANSPOSE, recording)
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
    shutil.copytree(TILE_SUMS, recording)
    for listing in recording.glob("sass-*.txt"):
        listing.write_text(listing.read_text().replace("_ZN4geom9tile_sumsILi32", "_ZN4geom9tile_sumsILi64"))
    spec = JobSpec(applications=[Application(command=["./bin/tile_sums"])], formula="diagnoseOnly")
    report = run_diagnosis(spec, backend=ReplayBackend(recording), project=EXAMPLES / "tile_sums")
    assert any("CUPTI's source page names no kernel that matches it" in w for w in report.warnings)
    tile32 = {d.formula: d for d in report.diagnoses if d.kernel == "_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi"}
    assert tile32["memoryAccess"].present and all(not d.locations for d in tile32.values())

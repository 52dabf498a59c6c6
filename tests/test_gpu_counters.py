"""The CUPTI counter pass on the GPU: the counts Nsight Compute measures on the same binary, every kernel of a
templated, namespaced and lambda application with its lines, a kernel launched once counted too, and a
recording that replays to the same profiles."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from benchmarks.counter_pass import WORK_COUNTS
from benchmarks.ncu.pages import parse_raw_csv, profile_command, read_raw_page
from benchmarks.ncu.source import COLUMNS, instructions_from_cuda_sass
from formulas.selection import formulas_for, metrics_for
from intelliperf.contract.profile import Column, Quantity
from intelliperf.gpu.backend import rank_kernels
from intelliperf.gpu.nvidia.backend import NvidiaBackend
from intelliperf.gpu.nvidia.cupti_counters import counter_pass_lock, parse_counters
from intelliperf.gpu.nvidia.metrics import kernel_metrics
from intelliperf.gpu.nvidia.profiles import counted_metrics
from intelliperf.gpu.replay import ReplayBackend

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
METRICS = metrics_for(formulas_for("auto"))

pytestmark = pytest.mark.gpu


def built(example: str) -> Path:
    subprocess.run(["make", "-s", "-C", str(EXAMPLES / example)], check=True, capture_output=True)
    return EXAMPLES / example


def every_kernel(folder: Path, app: str, backend: NvidiaBackend | None = None) -> list:
    """The application's kernels, ranked by the backend's timing pass (which a recording backend records)."""
    timing = (backend or NvidiaBackend()).time_kernels([app], cwd=folder, timeout_s=300)
    return [k for k in rank_kernels(timing.kernels) if not k.library]


def ncu_pages(folder: Path, app: str, kernels: list, tmp: Path) -> tuple[dict, dict]:
    """Nsight Compute's raw page and per-instruction columns of the same kernels' first launches."""
    metrics = kernel_metrics(METRICS, "sm_90")
    report, log = tmp / "p.ncu-rep", tmp / "ncu.log"
    command = profile_command(
        "ncu", [app], kernel_names=[k.name for k in kernels], metrics=metrics, report=report, log=log
    )
    with counter_pass_lock():  # ncu and the counter passes of tests running beside this one take turns
        subprocess.run(command, cwd=folder, check=True, capture_output=True, timeout=600)
    raw = {k.name: k.metrics for k in parse_raw_csv(read_raw_page("ncu", report, metrics=metrics))}
    return raw, instructions_from_cuda_sass(log.read_text())


def test_counts_equal_nsight_computes_on_templated_namespaced_and_lambda_kernels(tmp_path: Path) -> None:
    """tile_sums: six instantiations of geom::tile_sums<TILE>, geom::detail::normalize, a __device__ lambda's
    kernel and init_points (launched once). Every per-instruction total is ncu's exactly, every count of
    work too; throughputs within 25% (one kernel launch, two tools: CUPTI's range adds ~5 us to a launch)."""
    folder = built("tile_sums")
    backend = NvidiaBackend(record=tmp_path / "recording")
    kernels = every_kernel(folder, "./bin/tile_sums", backend)
    assert len(kernels) == 9
    profiles = backend.collect(
        ["./bin/tile_sums"], cwd=folder, kernels=kernels, metrics=METRICS, timeout_s=600
    )
    assert backend.take_notes() == []
    raw, pages = ncu_pages(folder, "./bin/tile_sums", kernels, tmp_path)
    records = parse_counters(
        [p.read_text() for p in sorted((tmp_path / "recording").glob("counters-*.jsonl"))]
    )
    assert set(profiles) == {k.name for k in kernels} == set(raw)
    for kernel in kernels:
        profile = profiles[kernel.name]
        assert profile.source and all(r.line > 0 and r.file.endswith("tile_sums.cu") for r in profile.source)
        for label, column in COLUMNS.items():
            theirs = sum(i.metrics.get(label, 0.0) for i in pages[kernel.name].values())
            assert profile.instruction_total(column) == theirs, (kernel.demangled, column)
        measured = counted_metrics(records.kernels[kernel.name], records.device)
        for name in WORK_COUNTS:
            assert measured[name] == pytest.approx(raw[kernel.name][name], rel=0.02), (kernel.demangled, name)
        busy = profile.optional(Quantity.L2_BUSY_PCT)
        assert busy is not None and 0 < busy <= 100
        duration = profile.optional(Quantity.KERNEL_TIME_NS)
        assert duration == pytest.approx(raw[kernel.name]["gpu__time_duration.sum"], rel=0.25)

    replayed = ReplayBackend(tmp_path / "recording")
    again = replayed.collect([], cwd=folder, kernels=kernels, metrics=METRICS, timeout_s=1)
    for name, profile in profiles.items():
        assert dict(again[name].metrics) == dict(profile.metrics)
        assert [(r.line, dict(r.metrics)) for r in again[name].source] == [
            (r.line, dict(r.metrics)) for r in profile.source
        ]


def test_a_kernel_launched_once_is_counted_in_a_second_run(tmp_path: Path) -> None:
    """atomic_reduction's fixed version launches init_values once: its kernel-level counters come from that
    launch, its instructions from a second run that counts only them."""
    folder = built("atomic_reduction")
    kernels = every_kernel(folder, "./bin/atomic_reduction_fixed")
    once = [k for k in kernels if k.launches == 1]
    assert once, [(k.demangled, k.launches) for k in kernels]
    backend = NvidiaBackend(record=tmp_path)
    profiles = backend.collect(
        ["./bin/atomic_reduction_fixed"], cwd=folder, kernels=kernels, metrics=METRICS, timeout_s=600
    )
    assert backend.take_notes() == []
    for kernel in once:
        profile = profiles[kernel.name]
        assert profile.instruction_total(Column.EXECUTED) > 0 and profile.source
        assert profile.optional(Quantity.KERNEL_TIME_NS)
    assert len(list(tmp_path.glob("counters-*.jsonl"))) == 2


def test_an_application_that_fails_under_the_counter_pass_is_reported_as_such(tmp_path: Path) -> None:
    from intelliperf.errors import AppError

    folder = built("transpose_bank")
    kernels = every_kernel(folder, "./bin/transpose")
    script = tmp_path / "fails.sh"
    script.write_text(f"#!/bin/sh\n{folder / 'bin' / 'transpose'} >/dev/null && exit 3\n")
    script.chmod(0o755)
    with pytest.raises(AppError, match="exited with code 3"):
        NvidiaBackend().collect([str(script)], cwd=folder, kernels=kernels, metrics=METRICS, timeout_s=600)


def test_the_cubins_and_counters_files_are_not_left_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = built("divergent_lanes")
    kernels = every_kernel(folder, "./bin/divergent_lanes")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    profiles = NvidiaBackend().collect(
        ["./bin/divergent_lanes"], cwd=folder, kernels=kernels, metrics=METRICS, timeout_s=600
    )
    assert profiles and list(tmp_path.iterdir()) == []

"""Proton's region shares against the warp-state sampler, on profiles recorded on an H100 (the Triton
examples' Proton profiles and source pages with warp-state samples of the uninstrumented kernels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.proton_shares import function_span, region_spans, sampled_lines, share_errors
from intelliperf.gpu.proton import scope_metrics
from tests.recorded import EXAMPLES, RECORDED


def compare(name: str, variant: str, app: str) -> dict[str, dict[str, float]]:
    folder = RECORDED / name / variant
    meta = json.loads((folder / "proton.json").read_text())
    scopes = scope_metrics(json.loads((folder / "proton.hatchet").read_text())[0], meta["kernel"])
    shares = {region: m["cycles"] / scopes["kernel"]["cycles"] for region, m in scopes.items()}
    source = (EXAMPLES / name / app).read_text()
    def_line = next(r["line"] for r in meta["regions"] if r["kind"] == "kernel")
    samples = sampled_lines((folder / "source_cuda_sass.csv").read_text(), meta["kernel"])
    return share_errors(
        shares, samples, region_spans(source, meta["regions"]), app, function_span(source, def_line)
    )


def test_the_atomic_kernel_spends_its_time_on_the_atomic_by_both_measures() -> None:
    regions = compare("triton_atomic", "original", "triton_bins.py")
    assert set(regions) == {"load@L24", "load@L25", "atomic@L26"}
    atomic = regions["atomic@L26"]
    assert atomic["sampled"] > 0.99 and atomic["proton"] > 0.98 and atomic["error"] < 0.02


def test_a_loop_region_takes_the_samples_of_every_line_of_its_body() -> None:
    regions = compare("triton_atomic", "fixed", "triton_bins_fixed.py")
    loop = regions["loop@L24"]
    inside = sum(r["sampled"] for name, r in regions.items() if name != "loop@L24")
    assert loop["sampled"] > inside and loop["sampled"] == pytest.approx(0.98, abs=0.02)


def test_a_loads_latency_is_proton_s_and_its_consumer_s_for_the_sampler() -> None:
    """The spilling softmax: Proton puts 29% in the row load's scope, the sampler 1%: its warps wait on
    the loaded row at the reduction that uses it. What the share error measures includes this."""
    regions = compare("triton_spill", "original", "softmax_rows.py")
    load = regions["load@L23"]
    assert load["proton"] > 0.25 and load["sampled"] < 0.05 and load["error"] > 0.2


def test_samples_count_once_and_only_for_the_kernel(tmp_path: Path) -> None:
    page = (RECORDED / "triton_strided" / "fixed" / "source_cuda_sass.csv").read_text()
    by_line = sampled_lines(page, "scale_elements")
    assert by_line and all(v >= 0 for v in by_line.values())
    assert sampled_lines(page, "no_such_kernel") == {}

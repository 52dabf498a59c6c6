"""Decisions and localization on real profiles of every example (recorded on an H100)."""

from __future__ import annotations

import pytest

from intelliperf.engine.diagnose import targets_of
from tests.recorded import (
    MANIFEST,
    RECORDED,
    RECORDED_EXAMPLES,
    is_kernel,
    is_main,
    main_profile,
    marker_line,
    replay,
)

BOTTLENECKED = [e["name"] for e in RECORDED_EXAMPLES if e["formula"]]
CONTROLS = [e["name"] for e in RECORDED_EXAMPLES if not e["formula"]]


def test_every_example_is_recorded() -> None:
    """Each example of the manifest has its original and fixed version recorded on the GPU machine
    (`python -m benchmarks.diagnose --record <folder> --only <names>`, copied to tests/fixtures/gpu)."""
    missing = [
        f"{e['name']}/{variant}"
        for e in MANIFEST
        for variant in ("original", "fixed")
        if not (RECORDED / e["name"] / variant / "trace.jsonl").is_file()
    ]
    assert not missing, f"not recorded yet: {', '.join(missing)}"


@pytest.mark.parametrize("name", BOTTLENECKED)
def test_auto_selects_the_known_bottleneck_and_line(name: str) -> None:
    example = next(e for e in MANIFEST if e["name"] == name)
    report = replay(name, formula="auto")
    assert report.selected is not None
    assert report.selected.formula == example["formula"]
    kernel = next(k for k in report.kernels if k.name == report.selected.kernel)
    main = next(
        k for k in report.kernels if not k.library and is_main(k, example)
    )  # torch_model: cuBLAS is hotter
    assert kernel == main and is_kernel(kernel.demangled, example["kernel"])
    diagnosis = next(
        d for d in report.diagnoses if d.kernel == kernel.name and d.formula == example["formula"]
    )
    assert diagnosis.severity == "high"
    hot = diagnosis.locations[0]
    assert hot.file == example["source"] and hot.line == marker_line(name)
    assert [line.line for line in hot.code if line.hot] == [marker_line(name)]
    assert "intelliperf:" in next(line.text for line in hot.code if line.hot)


@pytest.mark.parametrize("name", BOTTLENECKED)
def test_only_the_known_formula_fires_on_the_main_kernel(name: str) -> None:
    example = next(e for e in MANIFEST if e["name"] == name)
    report = replay(name)
    main = next(k for k in report.kernels if not k.library and is_main(k, example)).name
    present = {d.formula for d in report.diagnoses if d.kernel == main and d.present}
    assert present == {example["formula"], *example.get("also", [])}


@pytest.mark.parametrize("name", [e["name"] for e in RECORDED_EXAMPLES])
def test_fixed_versions_have_no_bottleneck(name: str) -> None:
    report = replay(name, "fixed")
    assert report.diagnoses and not report.bottlenecks, [d.reasoning for d in report.bottlenecks]
    assert replay(name, "fixed", formula="auto").selected is None


@pytest.mark.parametrize("name", CONTROLS)
def test_controls_have_no_bottleneck(name: str) -> None:
    report = replay(name)
    assert report.diagnoses and not report.bottlenecks


def test_atomic_rule_separates_contended_from_uncontended_atomics() -> None:
    from formulas.atomic_contention import AtomicContention

    formula = AtomicContention()
    contended = [formula.diagnose(main_profile(n)) for n in ("atomic_reduction", "histogram_atomic")]
    uncontended = formula.diagnose(main_profile("scatter_atomic"))
    few_after_fix = [
        formula.diagnose(main_profile(n, "fixed")) for n in ("atomic_reduction", "histogram_atomic")
    ]
    for diagnosis in contended:
        assert diagnosis.present and diagnosis.metrics["concentration"] > 30
    # Just as many atomics per element as atomic_reduction, but each on its own address.
    assert uncontended.metrics["atomic_warp_instructions"] > contended[0].metrics["atomic_warp_instructions"]
    assert uncontended.metrics["concentration"] < 1.1 and not uncontended.present
    # Same single address after the fix, but a thousand atomics cost little.
    for diagnosis in few_after_fix:
        assert diagnosis.metrics["concentration"] > 30 and not diagnosis.present
        assert diagnosis.metrics["serialized_share"] < 0.15


def test_estimated_savings_track_the_measured_fix() -> None:
    """The saving estimate is in the right range of what the fixed version really saved."""
    for name in BOTTLENECKED:
        before, after = main_profile(name), main_profile(name, "fixed")
        measured = 1 - after.duration_ns / before.duration_ns
        estimate = replay(name, formula="auto").selected
        assert estimate is not None
        estimated = estimate.estimated_saving_ns / before.duration_ns
        assert measured > 0.15 and abs(estimated - measured) < 0.4, (name, measured, estimated)


def test_bank_conflict_evidence_names_the_conflicting_load() -> None:
    report = replay("transpose_bank")
    diagnosis = next(d for d in report.bottlenecks if d.formula == "bankConflict")
    assert diagnosis.metrics["excess_share"] > 0.8 and diagnosis.metrics["utilization"] > 0.5
    hot = diagnosis.locations[0]
    assert hot.share > 0.9 and hot.metrics["excessive shared-memory wavefronts"] > 1e7
    assert "tile[threadIdx.x]" in next(line.text for line in hot.code if line.hot)


def test_atom_form_is_counted_where_the_global_atom_counter_is_n_a() -> None:
    """work_queue's `item = atomicAdd(&next, 1)` compiles to ATOMG; on sm_90 ncu prints n/a for
    smsp__inst_executed_op_global_atom.sum, and the sass/generic counters carry the count."""
    from formulas.atomic_contention import AtomicContention

    profile = main_profile("work_queue")
    assert profile.optional("smsp__inst_executed_op_global_atom.sum") is None  # recorded as n/a
    diagnosis = AtomicContention().evaluate(profile)
    assert diagnosis.decided and diagnosis.present
    assert diagnosis.metrics["red_warp_instructions"] == 0
    assert diagnosis.metrics["atom_warp_instructions"] > 500_000


def test_a_metric_that_is_n_a_is_never_read_as_0() -> None:
    from dataclasses import replace

    from formulas.atomic_contention import AtomicContention
    from formulas.branch_divergence import BranchDivergence
    from intelliperf.contract.profile import Quantity

    profile = main_profile("work_queue")
    returning = Quantity.ATOMIC_INSTRUCTIONS_RETURN
    without = {k: v for k, v in profile.metrics.items() if k != returning}
    diagnosis = AtomicContention().evaluate(replace(profile, metrics=without))
    assert not diagnosis.decided and not diagnosis.present
    assert returning in diagnosis.summary
    assert "not read as 0" in diagnosis.reasoning
    ratio = Quantity.ACTIVE_THREADS_PER_INSTRUCTION
    divergent = main_profile("divergent_lanes")
    undecided = BranchDivergence().evaluate(
        replace(divergent, metrics={k: v for k, v in divergent.metrics.items() if k != ratio})
    )
    assert not undecided.decided and ratio in undecided.summary


def test_library_kernels_are_listed_not_profiled_and_never_selected() -> None:
    report = replay("library_sort", formula="auto")
    library = [k for k in report.kernels if k.library]
    assert library and all("cub::" in k.demangled for k in library)
    assert sum(k.share for k in library) > 0.5  # the sort is where the time goes
    assert {d.kernel for d in report.diagnoses}.isdisjoint(k.name for k in library)
    assert len([w for w in report.warnings if "librar" in w]) == 1
    assert not any("no counters were collected" in w for w in report.warnings)
    assert report.selected is None
    triton = replay("triton_atomic", formula="auto")
    assert triton.selected is not None and triton.selected.kernel == "bin_sums"
    assert any(k.library and k.demangled.startswith("void at::native::") for k in triton.kernels)


def test_register_pressure_points_at_the_spilling_lines() -> None:
    report = replay("register_spill")
    diagnosis = next(d for d in report.bottlenecks if d.formula == "registerPressure")
    assert diagnosis.metrics["local_share"] > 0.9 and diagnosis.metrics["registers_per_thread"] == 32
    assert diagnosis.locations[0].metrics["local-memory instructions executed"] > 0
    fixed = next(d for d in replay("register_spill", "fixed").diagnoses if d.formula == "registerPressure")
    assert fixed.metrics["local_bytes"] == 0 and fixed.metrics["registers_per_thread"] > 32


def test_locality_is_kept_apart_from_uncoalesced_access() -> None:
    """A strided copy wastes sectors inside each request, but its caches serve the neighbours: L2
    reuse ~1. The vertical stencil's requests are coalesced, but each byte is fetched ~20x from L2."""
    from formulas.memory_locality import MemoryLocality

    formula = MemoryLocality()
    strided = formula.evaluate(main_profile("strided_copy"))
    stencil = formula.evaluate(main_profile("vertical_stencil"))
    row = formula.evaluate(main_profile("row_stencil"))
    assert not strided.present and strided.metrics["l2_reuse"] < 2
    assert stencil.present and stencil.metrics["l2_reuse"] > 10
    assert not row.present and row.metrics["l2_reuse"] < 2


def test_kernels_with_a_small_share_are_listed_but_not_profiled() -> None:
    report = replay("work_queue")  # init_values: 1.9% of GPU time
    init = next(k for k in report.kernels if k.demangled.startswith("init_values("))
    assert init.share < 0.05 and all(d.kernel != init.name for d in report.diagnoses)
    assert any("under 5% of GPU time" in w and "init_values" in w for w in report.warnings)
    named = targets_of(report.kernels, 10, explicit=True)  # -k: profiled whatever its share
    assert init.name in {k.name for k in named}
    fixed = replay("work_queue", "fixed")  # init_values: 12% once the main kernel is fast
    assert any(d.kernel == init.name for d in fixed.diagnoses)

"""Decisions and localization on real profiles of every example (recorded on an H200)."""

from __future__ import annotations

import pytest

from tests.recorded import MANIFEST, is_kernel, main_profile, marker_line, replay

BOTTLENECKED = [e["name"] for e in MANIFEST if e["formula"]]
CONTROLS = [e["name"] for e in MANIFEST if not e["formula"]]


@pytest.mark.parametrize("name", BOTTLENECKED)
def test_auto_selects_the_known_bottleneck_and_line(name: str) -> None:
    example = next(e for e in MANIFEST if e["name"] == name)
    report = replay(name, formula="auto")
    assert report.selected is not None
    assert report.selected.formula == example["formula"]
    kernel = next(k for k in report.kernels if k.name == report.selected.kernel)
    assert kernel.rank == 1 and is_kernel(kernel.demangled, example["kernel"])
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
    main = report.kernels[0].name
    present = {d.formula for d in report.diagnoses if d.kernel == main and d.present}
    assert present == {example["formula"]}


@pytest.mark.parametrize("name", [e["name"] for e in MANIFEST])
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
    assert hot.share > 0.9 and hot.metrics["L1 Wavefronts Shared Excessive"] > 1e7
    assert "tile[threadIdx.x]" in next(line.text for line in hot.code if line.hot)

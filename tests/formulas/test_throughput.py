"""Memory units' utilization: the sub-unit maximum on sm_90, Nsight Compute's breakdown elsewhere."""

from __future__ import annotations

import pytest

from formulas.base import KernelProfile, MissingMetricError
from formulas.registry import FormulaRegistrationError, validate
from formulas.selection import formulas_for, metrics_for
from formulas.throughput import busiest_unit, unit_metrics, unit_utilization

PCT = ".avg.pct_of_peak_sustained_elapsed"


def profile(metrics: dict[str, float], arch: str = "sm_90") -> KernelProfile:
    return KernelProfile(name="k", demangled="k()", duration_ns=1e5, metrics=metrics, arch=arch)


def test_sm90_reads_the_busiest_sub_unit() -> None:
    kernel = profile({"lts__ltcfabric2ltc_cycles_active" + PCT: 69.0, "lts__t_tag_requests" + PCT: 26.9})
    assert unit_utilization(kernel, "L2 cache") == pytest.approx(0.69)
    assert unit_utilization(kernel, "L1 cache") is None  # no L1 metric: unknown, not idle


def test_an_unmeasured_architecture_reads_the_breakdown_metric() -> None:
    assert unit_metrics("L2 cache", "sm_80") == ("lts__throughput" + PCT,)
    kernel = profile({"lts__throughput" + PCT: 55.0, "lts__ltcfabric2ltc_cycles_active" + PCT: 90.0}, "sm_80")
    assert unit_utilization(kernel, "L2 cache") == pytest.approx(0.55)


def test_busiest_unit_skips_units_without_values_and_refuses_when_none_has_one() -> None:
    kernel = profile({"dram__throughput" + PCT: 30.0, "l1tex__data_pipe_lsu_wavefronts" + PCT: 91.5})
    assert busiest_unit(kernel, ("DRAM", "L2 cache", "L1 cache")) == (pytest.approx(0.915), "L1 cache")
    with pytest.raises(MissingMetricError) as missing:
        busiest_unit(profile({}), ("L2 cache",))
    assert "lts__ltcfabric2ltc_cycles_active" + PCT in missing.value.names


def test_the_counter_pass_asks_for_the_architectures_metrics() -> None:
    on_hopper = metrics_for(formulas_for("auto"), "sm_90")
    assert "lts__xbar2lts_cycles_active" + PCT in on_hopper
    assert "lts__throughput" + PCT not in on_hopper and "l1tex__throughput" + PCT not in on_hopper
    elsewhere = metrics_for(formulas_for("auto"), "sm_89")
    assert "lts__throughput" + PCT in elsewhere and "lts__xbar2lts_cycles_active" + PCT not in elsewhere
    assert "dram__throughput" + PCT not in metrics_for(formulas_for("bankConflict"), "sm_90")


def test_a_formula_naming_an_unknown_unit_is_refused() -> None:
    from formulas.memory_access import MemoryAccess

    class Odd(MemoryAccess):
        name = "oddUnits"
        units = ("L3 cache",)

    with pytest.raises(FormulaRegistrationError, match="unknown memory units"):
        validate(Odd, {})


def test_gpu_facts_come_from_the_architecture_or_an_older_one_of_its_vendor_never_another_chip() -> None:
    from formulas.specs import UnknownArchitectureError, facts_for

    assert facts_for("sm_90").warp_size == 32
    assert facts_for("sm_90a") == facts_for("sm_100") == facts_for("sm_90")  # nearest older measured
    for arch in ("sm_80", "gfx942", "gfx90a", "hopper"):
        with pytest.raises(UnknownArchitectureError, match=f"no GPU facts for '{arch}'"):
            facts_for(arch)


def test_a_formula_that_needs_facts_of_an_unknown_architecture_says_it_could_not_decide() -> None:
    """The atomics formula reasons with the measured same-address atomic time: on gfx942 it has none. The same
    recorded counters (atomic_reduction on an H100) decide on the chip they were measured on."""
    from dataclasses import replace

    from formulas.atomic_contention import AtomicContention
    from tests.recorded import main_profile

    recorded = main_profile("atomic_reduction")
    on_hopper = AtomicContention().evaluate(recorded)
    assert on_hopper.decided and on_hopper.present
    on_amd = AtomicContention().evaluate(replace(recorded, arch="gfx942"))
    assert on_amd.decided is False and on_amd.present is False and on_amd.estimated_saving_fraction == 0
    assert "gfx942" in on_amd.summary and "not been calibrated" in on_amd.reasoning

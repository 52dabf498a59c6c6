"""Memory units' utilization, read from one vendor-neutral quantity per unit."""

from __future__ import annotations

import pytest

from formulas.registry import FormulaRegistrationError, validate
from formulas.selection import formulas_for, metrics_for
from formulas.throughput import busiest_unit, unit_utilization
from intelliperf.contract.profile import KernelProfile, MissingMetricError, Quantity


def profile(metrics: dict[str, float], arch: str = "sm_90") -> KernelProfile:
    return KernelProfile(name="k", demangled="k()", duration_ns=1e5, metrics=metrics, arch=arch)


def test_a_unit_without_a_value_is_unknown_not_idle() -> None:
    kernel = profile({Quantity.L2_BUSY_PCT: 69.0})
    assert unit_utilization(kernel, "L2 cache") == pytest.approx(0.69)
    assert unit_utilization(kernel, "L1 cache") is None


def test_busiest_unit_skips_units_without_values_and_refuses_when_none_has_one() -> None:
    kernel = profile({Quantity.DRAM_BUSY_PCT: 30.0, Quantity.L1_BUSY_PCT: 91.5})
    assert busiest_unit(kernel, ("DRAM", "L2 cache", "L1 cache")) == (pytest.approx(0.915), "L1 cache")
    with pytest.raises(MissingMetricError) as missing:
        busiest_unit(profile({}), ("L2 cache",))
    assert missing.value.names == (Quantity.L2_BUSY_PCT,)


def test_the_formulas_ask_for_their_units_quantities_only() -> None:
    everything = metrics_for(formulas_for("auto"))
    assert {Quantity.DRAM_BUSY_PCT, Quantity.L2_BUSY_PCT, Quantity.L1_BUSY_PCT} <= set(everything)
    # bank conflicts read DRAM and L2 (what their fix leaves alone bounds the saving), not L1's breakdown
    bank = metrics_for(formulas_for("bankConflict"))
    assert Quantity.DRAM_BUSY_PCT in bank and Quantity.L1_BUSY_PCT not in bank
    assert all(isinstance(q, Quantity) for q in everything)


def test_a_formula_naming_an_unknown_unit_is_refused() -> None:
    from formulas.memory_access import MemoryAccess

    class Odd(MemoryAccess):
        name = "oddUnits"
        units = ("L3 cache",)

    with pytest.raises(FormulaRegistrationError, match="unknown memory units"):
        validate(Odd, {})


def test_gpu_facts_come_from_the_architecture_or_an_older_one_of_its_vendor_never_another_chip() -> None:
    from intelliperf.contract.gpu_facts import UnknownArchitectureError, facts_for

    assert facts_for("sm_90").warp_size == 32
    assert facts_for("sm_90a") == facts_for("sm_100") == facts_for("sm_90")  # nearest older measured
    assert facts_for("gfx942").warp_size == 64  # CDNA3's wavefront, never Hopper's warp
    assert facts_for("gfx90a") == facts_for("gfx942")  # CDNA2 and CDNA3 document the same numbers
    for arch in ("sm_80", "gfx908", "gfx1100", "hopper"):
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
    assert "gfx942" in on_amd.summary and "no same-address atomic service time" in on_amd.reasoning
    on_unknown = AtomicContention().evaluate(replace(recorded, arch="gfx1100"))
    assert on_unknown.decided is False and "not been calibrated" in on_unknown.reasoning

from __future__ import annotations

import types
from typing import ClassVar

import pytest

from formulas.base import Formula
from formulas.registry import FormulaRegistrationError, all_formulas, concrete_formula, get, validate
from formulas.selection import formulas_for, metrics_for, select
from intelliperf.contract import Diagnosis, RankedKernel
from intelliperf.contract.profile import KernelProfile, Quantity
from intelliperf.errors import SpecError
from tests.support.reports import make_diagnosis, make_kernel


def test_builtin_formulas_registered() -> None:
    assert set(all_formulas()) == {
        "bankConflict",
        "atomicContention",
        "memoryAccess",
        "registerPressure",
        "branchDivergence",
        "memoryLocality",
        "occupancy",
    }
    assert get("bankConflict")().title == "Shared-memory bank conflicts"
    with pytest.raises(SpecError, match=r"unknown formula 'bank'.*bankConflict"):
        get("bank")


def make_formula(
    name: str = "myFormula", metrics: tuple[str, ...] = (Quantity.KERNEL_TIME_NS,)
) -> type[Formula]:
    class Custom(Formula):
        title = "Custom"
        metric_label = "things"

        def diagnose(self, kernel: KernelProfile) -> Diagnosis:
            raise NotImplementedError

        def bottleneck_metric(self, kernel: KernelProfile) -> float:
            return 0.0

        def prompt_context(self, diagnosis: Diagnosis) -> str:
            return ""

    Custom.name = name
    Custom.metrics = metrics  # type: ignore[misc]
    return Custom


@pytest.mark.parametrize(
    ("name", "metrics", "message"),
    [
        ("bankConflict", ("gpu__time_duration.sum",), "already taken"),
        ("auto", (Quantity.KERNEL_TIME_NS,), "already taken"),
        ("Bad Name", (Quantity.KERNEL_TIME_NS,), "lowerCamelCase"),
        ("myFormula", (), "declares no metrics"),
        ("myFormula", ("not a metric",), "must be intelliperf.contract.profile.Quantity members"),
        # a vendor's own counter name: no backend but that vendor's could measure it
        ("myFormula", ("lts__t_sectors_op_red.max",), "must be intelliperf.contract.profile.Quantity"),
    ],
)
def test_registration_is_checked(name: str, metrics: tuple[str, ...], message: str) -> None:
    with pytest.raises(FormulaRegistrationError, match=message):
        validate(make_formula(name, metrics), dict(all_formulas()))


def test_a_formula_may_read_only_its_memory_units_and_the_source_columns() -> None:
    formula = make_formula("unitsOnly", ())
    formula.units = ("L2 cache",)  # type: ignore[misc]
    validate(formula, dict(all_formulas()))
    assert Quantity.L2_BUSY_PCT in metrics_for([formula()])


def test_a_module_must_hold_exactly_one_formula() -> None:
    module = types.ModuleType("plugin")
    with pytest.raises(FormulaRegistrationError, match="found 0"):
        concrete_formula(module)
    first, second = make_formula(), make_formula("other")
    first.__module__ = second.__module__ = "plugin"
    module.A, module.B = first, second  # type: ignore[attr-defined]
    with pytest.raises(FormulaRegistrationError, match="found 2"):
        concrete_formula(module)


def test_metrics_are_the_union_without_duplicates() -> None:
    metrics = metrics_for(formulas_for("auto"))
    assert len(metrics) == len(set(metrics))
    assert Quantity.L2_ATOMICS_BUSIEST_SLICE in metrics and Quantity.KERNEL_TIME_NS in metrics
    assert set(metrics_for(formulas_for("bankConflict"))) < set(metrics)


def kernel(rank: int, name: str) -> RankedKernel:
    return make_kernel(rank, name)


def diagnosis(kernel_name: str, formula: str, saving: float, present: bool = True) -> Diagnosis:
    return make_diagnosis(kernel_name, formula, present=present, saving_ns=saving, summary="", reasoning="")


class TestSelection:
    kernels: ClassVar = [kernel(1, "hot"), kernel(2, "warm")]
    found: ClassVar = [
        diagnosis("hot", "bankConflict", 100),
        diagnosis("hot", "memoryAccess", 300),
        diagnosis("warm", "atomicContention", 5000),
        diagnosis("hot", "atomicContention", 9999, present=False),
    ]

    def test_auto_takes_the_largest_saving_on_the_hottest_kernel_with_one(self) -> None:
        chosen = select("auto", self.kernels, self.found)
        assert chosen is not None and (chosen.kernel, chosen.formula) == ("hot", "memoryAccess")
        assert "bankConflict" in chosen.why

    def test_named_formula_takes_the_hottest_kernel_where_it_is_present(self) -> None:
        chosen = select("atomicContention", self.kernels, self.found)
        assert chosen is not None and (chosen.kernel, chosen.formula) == ("warm", "atomicContention")

    def test_diagnose_only_and_nothing_present_select_nothing(self) -> None:
        assert select("diagnoseOnly", self.kernels, self.found) is None
        assert select("auto", self.kernels, [d for d in self.found if not d.present]) is None

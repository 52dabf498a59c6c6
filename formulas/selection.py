"""Which formulas run, which metrics that takes, and which bottleneck the engine goes after."""

from __future__ import annotations

from collections.abc import Sequence

from formulas.base import Formula
from formulas.registry import all_formulas, get
from formulas.throughput import throughput_metrics
from intelliperf.contract import Diagnosis, RankedKernel, Selection
from intelliperf.contract.profile import Quantity

__all__ = ["BASE_METRICS", "formulas_for", "metrics_for", "select"]

BASE_METRICS = (Quantity.KERNEL_TIME_NS, Quantity.GRID_SIZE, Quantity.BLOCK_SIZE)


def formulas_for(requested: str) -> list[Formula]:
    """'auto' and 'diagnoseOnly' run every formula; a formula name runs that one."""
    if requested in ("auto", "diagnoseOnly"):
        return [cls() for cls in all_formulas().values()]
    return [get(requested)()]


def metrics_for(formulas: Sequence[Formula]) -> list[Quantity]:
    """The quantities the formulas read: their own and their memory units' (formulas.throughput). The
    backend turns them into its profiler's counters for the GPU at hand."""
    wanted = dict.fromkeys(BASE_METRICS)
    for formula in formulas:
        wanted.update(dict.fromkeys(formula.metrics))
        wanted.update(dict.fromkeys(throughput_metrics(formula.units)))
    return list(wanted)


def select(
    requested: str, kernels: Sequence[RankedKernel], diagnoses: Sequence[Diagnosis]
) -> Selection | None:
    """The bottleneck to optimize, or None.

    'auto': the hottest kernel that has a bottleneck, and on it the formula with the largest
    estimated saving. A named formula: the hottest kernel on which it is present. 'diagnoseOnly':
    nothing is selected (diagnosis is the whole job). Library kernels are never selected.
    """
    if requested == "diagnoseOnly":
        return None
    for kernel in sorted(kernels, key=lambda k: k.rank):
        if kernel.library:
            continue
        present = [
            d
            for d in diagnoses
            if d.kernel == kernel.name and d.present and (requested == "auto" or d.formula == requested)
        ]
        if not present:
            continue
        best = max(present, key=lambda d: d.estimated_saving_ns)
        others = ", ".join(
            f"{d.formula} ~{d.estimated_saving_ns / 1e3:.1f} us" for d in present if d is not best
        )
        why = (
            f"hottest kernel with a bottleneck (rank {kernel.rank}, {kernel.share:.0%} of GPU time); "
            f"{best.formula} has the largest estimated saving, "
            f"~{best.estimated_saving_ns / 1e3:.1f} us per launch"
        )
        if others:
            why += f" (also present: {others})"
        return Selection(
            kernel=kernel.name, formula=best.formula, estimated_saving_ns=best.estimated_saving_ns, why=why
        )
    return None

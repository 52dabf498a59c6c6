"""How busy a memory unit was (DRAM, L2, L1), from the cheapest metrics that tell it, per architecture.

Nsight Compute's `lts__throughput` and `l1tex__throughput` are each the maximum over many sub-unit
throughputs, and collecting those breakdowns costs replay passes: on an H100 (ncu 2025.3) the formulas'
metrics took 12 passes per kernel with them and 8 without, 15 against 11 with the source counters, at
~41 ms per pass per kernel. On sm_90 the maximum came, on every one of the 40 example kernels measured
(originals and fixed versions), from two L1 and four L2 sub-units; their maximum gives the same
utilization (within 0.05 points on 39 kernels, 0.35 on the 40th) for one pass more than without.
Architectures not measured read Nsight Compute's breakdown metrics themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from formulas.base import KernelProfile, MissingMetricError

__all__ = ["UNITS", "busiest_unit", "throughput_metrics", "unit_metrics", "unit_utilization"]

_PCT = ".avg.pct_of_peak_sustained_elapsed"

UNITS = ("DRAM", "L2 cache", "L1 cache")

_BREAKDOWN: dict[str, tuple[str, ...]] = {
    "DRAM": ("dram__throughput" + _PCT,),
    "L2 cache": ("lts__throughput" + _PCT,),
    "L1 cache": ("l1tex__throughput" + _PCT,),
}

_SUB_UNITS: dict[str, dict[str, tuple[str, ...]]] = {
    "sm_90": {
        "DRAM": _BREAKDOWN["DRAM"],
        "L2 cache": tuple(
            name + _PCT
            for name in (
                "lts__ltcfabric2ltc_cycles_active",
                "lts__xbar2lts_cycles_active",
                "lts__t_tag_requests",
                "lts__lts2xbar_cycles_active_realtime",
            )
        ),
        "L1 cache": tuple(
            name + _PCT
            for name in ("l1tex__m_l1tex2xbar_req_cycles_active", "l1tex__data_pipe_lsu_wavefronts")
        ),
    },
}


def unit_metrics(unit: str, arch: str) -> tuple[str, ...]:
    """The metrics whose maximum is ``unit``'s utilization on ``arch``, in percent of peak."""
    if unit not in _BREAKDOWN:
        raise ValueError(f"unknown memory unit {unit!r}; known: {', '.join(UNITS)}")
    return _SUB_UNITS.get(arch, _BREAKDOWN)[unit]


def throughput_metrics(units: Iterable[str], arch: str) -> list[str]:
    return list(dict.fromkeys(name for unit in units for name in unit_metrics(unit, arch)))


def unit_utilization(kernel: KernelProfile, unit: str) -> float | None:
    """``unit``'s utilization as a fraction 0..1, or None when none of its metrics has a value."""
    values = [v for name in unit_metrics(unit, kernel.arch) if (v := kernel.optional(name)) is not None]
    return max(values) / 100.0 if values else None


def busiest_unit(kernel: KernelProfile, units: Sequence[str]) -> tuple[float, str]:
    """The busiest of ``units`` that have a value, as (fraction 0..1, unit name); raises
    MissingMetricError when none has one."""
    measured = {unit: value for unit in units if (value := unit_utilization(kernel, unit)) is not None}
    if not measured:
        raise MissingMetricError(kernel.demangled or kernel.name, throughput_metrics(units, kernel.arch))
    unit = max(measured, key=measured.__getitem__)
    return measured[unit], unit

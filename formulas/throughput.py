"""How busy a memory unit was (DRAM, L2, L1): one quantity per unit, measured as each backend can.

On NVIDIA the unit's utilization is the busiest of its sub-units, read from the cheapest Nsight Compute
metrics that tell it per architecture (intelliperf.gpu.nvidia.metrics says which and what they cost).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from intelliperf.contract.profile import KernelProfile, MissingMetricError, Quantity

__all__ = ["UNITS", "UNIT_QUANTITIES", "busiest_unit", "throughput_metrics", "unit_utilization"]

UNIT_QUANTITIES: dict[str, Quantity] = {
    "DRAM": Quantity.DRAM_BUSY_PCT,
    "L2 cache": Quantity.L2_BUSY_PCT,
    "L1 cache": Quantity.L1_BUSY_PCT,
}
UNITS = tuple(UNIT_QUANTITIES)


def _quantity(unit: str) -> Quantity:
    if unit not in UNIT_QUANTITIES:
        raise ValueError(f"unknown memory unit {unit!r}; known: {', '.join(UNITS)}")
    return UNIT_QUANTITIES[unit]


def throughput_metrics(units: Iterable[str]) -> list[Quantity]:
    """The quantities that tell how busy ``units`` were."""
    return list(dict.fromkeys(_quantity(unit) for unit in units))


def unit_utilization(kernel: KernelProfile, unit: str) -> float | None:
    """``unit``'s utilization as a fraction 0..1, or None when it has no value."""
    value = kernel.optional(_quantity(unit))
    return value / 100.0 if value is not None else None


def measured_units(kernel: KernelProfile, units: Sequence[str]) -> dict[str, float]:
    """Each of ``units`` that has a value, with its utilization (0..1), in the order given; raises
    MissingMetricError when none has one."""
    measured = {unit: value for unit in units if (value := unit_utilization(kernel, unit)) is not None}
    if not measured:
        raise MissingMetricError(kernel.demangled or kernel.name, throughput_metrics(units))
    return measured


def busiest_unit(kernel: KernelProfile, units: Sequence[str]) -> tuple[float, str]:
    """The busiest of ``units`` that have a value, as (fraction 0..1, unit name); raises
    MissingMetricError when none has one."""
    measured = measured_units(kernel, units)
    unit = max(measured, key=measured.__getitem__)
    return measured[unit], unit

"""The AMD backend's one table: the formulas' quantities (formulas.quantities) from rocprofv3 counters,
for CDNA GPUs (gfx90a, gfx942). NOT YET RUN ON AMD HARDWARE: the counter names are those rocprofv3's
counter definitions list for gfx942 (ROCm/rocm-systems, rocprofiler-sdk counter_defs.yaml) and the
expressions follow the derived metrics AMD documents; both want checking on an MI300.

- Shared memory (LDS): SQ_LDS_IDX_ACTIVE counts the cycles the LDS was active, SQ_LDS_BANK_CONFLICT the
  cycles it was stalled by bank conflicts; their ratio is rocprofiler-compute's "Bank Conflict Rate"
  (the share of active LDS cycles spent on conflicts), the counterpart of NVIDIA's excessive over all
  shared wavefronts. LDS utilization is active LDS cycles over all CU cycles (GRBM_GUI_ACTIVE x CUs).
- Divergence: SQ_THREAD_CYCLES_VALU / SQ_ACTIVE_INST_VALU is the average number of active lanes per VALU
  instruction ("VALUUtilization" x wavefront size in rocprof's derived metrics); VALU busy is
  SQ_ACTIVE_INST_VALU x 4 / SIMDs / GRBM_GUI_ACTIVE with 4 SIMDs per CU. Lane-slots are counted in VALU
  cycles (active-instruction and thread cycles), so their ratio is the same as NVIDIA's per-instruction
  one.
- Atomics: TCP_TOTAL_ATOMIC_WITH_RET / _WITHOUT_RET count the atomics that return the old value and those
  that do not. Their concentration in one L2 channel needs per-channel counts, which rocprofv3's summed
  counters do not give: the atomics formula does not decide on AMD yet.
- Not mapped yet (the formulas that need them say they could not decide): global sectors and their ideal
  (coalescing), local (scratch) traffic, L1/L2/DRAM utilization, L2 reuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from formulas.quantities import Quantity
from intelliperf.contract import DeviceInfo

__all__ = ["COUNTER_GROUPS", "counters_for", "kernel_quantities", "supported"]

COUNTER_GROUPS: tuple[tuple[str, ...], ...] = (
    ("GRBM_GUI_ACTIVE", "SQ_LDS_IDX_ACTIVE", "SQ_LDS_BANK_CONFLICT", "SQ_ACTIVE_INST_VALU"),
    ("SQ_THREAD_CYCLES_VALU", "SQ_INSTS_VALU", "SQ_WAVES"),
    ("TCP_TOTAL_ATOMIC_WITH_RET", "TCP_TOTAL_ATOMIC_WITHOUT_RET", "TCC_HIT_sum", "TCC_MISS_sum"),
)
"""The counters, in groups that each fit one rocprofv3 pass (one run per group)."""

ARCHITECTURES = ("gfx90a", "gfx942")
SIMDS_PER_CU = 4

Counters = Mapping[str, float]


@dataclass(frozen=True)
class _Entry:
    counters: tuple[str, ...]
    value: Callable[[Counters, DeviceInfo], float | None]


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def _lds_busy(c: Counters, device: DeviceInfo) -> float | None:
    if not device.sm_count:
        return None
    cycles = _ratio(c["SQ_LDS_IDX_ACTIVE"], c["GRBM_GUI_ACTIVE"] * device.sm_count)
    return None if cycles is None else 100.0 * cycles


def _valu_busy(c: Counters, device: DeviceInfo) -> float | None:
    if not device.sm_count:
        return None
    share = _ratio(c["SQ_ACTIVE_INST_VALU"] * 4, device.sm_count * SIMDS_PER_CU * c["GRBM_GUI_ACTIVE"])
    return None if share is None else 100.0 * share


def _l2_hit(c: Counters, device: DeviceInfo) -> float | None:
    share = _ratio(c["TCC_HIT_sum"], c["TCC_HIT_sum"] + c["TCC_MISS_sum"])
    return None if share is None else 100.0 * share


_TABLE: dict[Quantity, _Entry] = {
    Quantity.SHARED_ACCESS_UNITS: _Entry(("SQ_LDS_IDX_ACTIVE",), lambda c, d: c["SQ_LDS_IDX_ACTIVE"]),
    Quantity.SHARED_ACCESS_UNITS_EXCESS: _Entry(
        ("SQ_LDS_BANK_CONFLICT",), lambda c, d: c["SQ_LDS_BANK_CONFLICT"]
    ),
    Quantity.SHARED_ACCESS_UNITS_IDEAL: _Entry(
        ("SQ_LDS_IDX_ACTIVE", "SQ_LDS_BANK_CONFLICT"),
        lambda c, d: max(0.0, c["SQ_LDS_IDX_ACTIVE"] - c["SQ_LDS_BANK_CONFLICT"]),
    ),
    Quantity.SHARED_PIPE_BUSY_PCT: _Entry(("SQ_LDS_IDX_ACTIVE", "GRBM_GUI_ACTIVE"), _lds_busy),
    Quantity.ACTIVE_THREADS_PER_INSTRUCTION: _Entry(
        ("SQ_THREAD_CYCLES_VALU", "SQ_ACTIVE_INST_VALU"),
        lambda c, d: _ratio(c["SQ_THREAD_CYCLES_VALU"], c["SQ_ACTIVE_INST_VALU"]),
    ),
    Quantity.ISSUE_BUSY_PCT: _Entry(("SQ_ACTIVE_INST_VALU", "GRBM_GUI_ACTIVE"), _valu_busy),
    Quantity.WARP_INSTRUCTIONS: _Entry(("SQ_ACTIVE_INST_VALU",), lambda c, d: c["SQ_ACTIVE_INST_VALU"]),
    Quantity.THREAD_INSTRUCTIONS: _Entry(("SQ_THREAD_CYCLES_VALU",), lambda c, d: c["SQ_THREAD_CYCLES_VALU"]),
    Quantity.ATOMIC_INSTRUCTIONS_RETURN: _Entry(
        ("TCP_TOTAL_ATOMIC_WITH_RET",), lambda c, d: c["TCP_TOTAL_ATOMIC_WITH_RET"]
    ),
    Quantity.ATOMIC_INSTRUCTIONS_NO_RETURN: _Entry(
        ("TCP_TOTAL_ATOMIC_WITHOUT_RET",), lambda c, d: c["TCP_TOTAL_ATOMIC_WITHOUT_RET"]
    ),
    Quantity.L2_READ_HIT_PCT: _Entry(("TCC_HIT_sum", "TCC_MISS_sum"), _l2_hit),
}


def supported(arch: str) -> bool:
    return arch in ARCHITECTURES


def counters_for(quantities: Sequence[Quantity]) -> list[tuple[str, ...]]:
    """The counter groups (one rocprofv3 pass each) that hold what ``quantities`` need; groups none of
    whose counters is needed are skipped."""
    needed = {name for q in quantities if q in _TABLE for name in _TABLE[q].counters}
    return [group for group in COUNTER_GROUPS if needed.intersection(group)]


def kernel_quantities(counters: Counters, device: DeviceInfo) -> dict[str, float]:
    """Every quantity the table gives from one kernel's counters; one whose counters are missing is left
    out (never 0)."""
    found: dict[str, float] = {}
    for quantity, entry in _TABLE.items():
        if all(name in counters for name in entry.counters):
            value = entry.value(counters, device)
            if value is not None:
                found[quantity.value] = float(value)
    return found

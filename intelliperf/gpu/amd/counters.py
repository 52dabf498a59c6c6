"""The AMD backend's one table: the formulas' quantities (intelliperf.contract.profile) from rocprofv3
counters, for CDNA GPUs (gfx90a, gfx942). NOT YET RUN ON AMD HARDWARE: the counter names are those rocprofv3's
counter definitions list for gfx90a and gfx942 (ROCm/rocprofiler-sdk counter_defs.yaml, the same in
ROCm/rocm-systems), and the expressions are rocprof-compute's (ROCm/rocprofiler-compute 95b600ea,
src/rocprof_compute_soc/analysis_configs/gfx942/*.yaml); both want checking on an MI300.

- Cycles: rocprofv3's CSV sums a counter over its instances, so on a GPU of several XCDs (MI300X: 8)
  GRBM_GUI_ACTIVE is the sum of every XCD's busy cycles; rocprof-compute divides it by the XCD count
  ($GRBM_GUI_ACTIVE_PER_XCD). The XCD count is the CU count over 38 CUs per XCD on gfx942 (MI300X 304,
  MI300A 228, one XCD per CPX partition); where that is not a whole number (MI308X) the utilizations
  are left out, never guessed. gfx90a has one XCD per device.
- Shared memory (LDS): SQ_LDS_IDX_ACTIVE counts the cycles the LDS was active, SQ_LDS_BANK_CONFLICT the
  cycles it was stalled by bank conflicts; their ratio is rocprof-compute's "Bank Conflict Rate" (the
  share of active LDS cycles spent on conflicts), the counterpart of NVIDIA's excessive over all shared
  wavefronts. LDS utilization: 100 x SQ_LDS_IDX_ACTIVE / (cycles per XCD x CUs) ("LDS Utilization").
- Divergence: SQ_THREAD_CYCLES_VALU / SQ_ACTIVE_INST_VALU is the average number of active lanes per VALU
  instruction ("VALUUtilization" x wavefront size in rocprof's derived metrics); VALU busy is
  100 x SQ_ACTIVE_INST_VALU / (cycles per XCD x CUs) ("VALU Utilization").
- Memory units: L1 (vL1D) busy is 100 x TCP_GATE_EN2_sum / TCP_GATE_EN1_sum ("Utilization" of the vL1D
  panel); L2 busy is 100 x TCC_BUSY_sum / (L2 channels x cycles per XCD), the channels being 16 per XCD
  on gfx942 and 32 on gfx90a, so 100 x TCC_BUSY_sum / (channels per XCD x GRBM_GUI_ACTIVE). DRAM busy is
  not mapped (it needs the peak bandwidth of each part).
- Coalescing: the vL1D "Coalescing" metric is TA_TOTAL_WAVEFRONTS_sum x 64 / (TCP_TOTAL_ACCESSES_sum x 4):
  the thread-requests the address unit (TA) sends the vL1D (TCP) against 16 per wavefront instruction,
  the ideal; "from uncoalesced (25%) to fully coalesced (100%)". Its actual and ideal request counts are
  the global-access units here, without atomics (TCP_TOTAL_ATOMIC_* requests, TA_*_ATOMIC_WAVEFRONTS),
  as NVIDIA's sectors of global loads and stores leave atomics to their own formula. Caveat: the ideal of
  16 requests assumes 4-byte lanes; how the TA counts 8- and 16-byte lanes is not documented, so a
  vectorized kernel may read as uncoalesced until an MI300 run settles it.
- Atomics: TCP_TOTAL_ATOMIC_WITH_RET / _WITHOUT_RET count the TA's requests of atomics that return the
  old value and of those that do not ("pixels/buffers from TA": up to one a lane, not one an
  instruction), and TA_*_ATOMIC_WAVEFRONTS their instructions without that split, so the atomic
  instruction counts are not mapped. Their concentration in one L2 channel needs per-channel counts,
  which rocprofv3's CSV does not give (it sums TCC_ATOMIC over channels; a per-channel value needs a
  select() counter definition loaded into rocprofv3, not tried without hardware): the atomics formula
  does not decide on AMD yet.
- Not mapped (the formulas that need them say they could not decide): local (scratch) traffic, since no
  counter documented for gfx942 counts scratch accesses (gfx90a's buffer instructions are spills only by
  convention) and Scratch_Size is an allocation, not traffic; DRAM utilization; L2 reuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from intelliperf.contract import DeviceInfo
from intelliperf.contract.profile import Quantity
from intelliperf.gpu.amd.rocprof import KernelResources

__all__ = ["COUNTER_GROUPS", "counters_for", "kernel_quantities", "launch_quantities", "supported"]

COUNTER_GROUPS: tuple[tuple[str, ...], ...] = (
    ("GRBM_GUI_ACTIVE", "SQ_LDS_IDX_ACTIVE", "SQ_LDS_BANK_CONFLICT", "SQ_ACTIVE_INST_VALU"),
    ("SQ_THREAD_CYCLES_VALU", "SQ_INSTS_VALU", "SQ_WAVES"),
    ("TCP_TOTAL_ATOMIC_WITH_RET", "TCP_TOTAL_ATOMIC_WITHOUT_RET"),
    (
        "TCP_TOTAL_ACCESSES_sum",
        "TCP_GATE_EN1_sum",
        "TCP_GATE_EN2_sum",
        "TCC_BUSY_sum",
        "TA_TOTAL_WAVEFRONTS_sum",
    ),
    ("TA_FLAT_ATOMIC_WAVEFRONTS_sum", "TA_BUFFER_ATOMIC_WAVEFRONTS_sum"),
)
"""The counters, in groups that each fit one rocprofv3 pass (one run per group)."""

ARCHITECTURES = ("gfx90a", "gfx942")
CUS_PER_XCD = {"gfx942": 38}
"""Active CUs per XCD (AMD CDNA 3 white paper); an architecture not listed has one XCD per device."""
L2_CHANNELS_PER_XCD = {"gfx90a": 32, "gfx942": 16}
IDEAL_REQUESTS_PER_WAVEFRONT = 16.0
"""The vL1D Coalescing metric's ideal: 64 lanes, 4 of them per thread-request."""

Counters = Mapping[str, float]


@dataclass(frozen=True)
class _Entry:
    counters: tuple[str, ...]
    value: Callable[[Counters, DeviceInfo], float | None]


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


def _percent(numerator: float, denominator: float) -> float | None:
    share = _ratio(numerator, denominator)
    return None if share is None else 100.0 * share


def _cycles_per_xcd(c: Counters, device: DeviceInfo) -> float | None:
    """GRBM_GUI_ACTIVE of one XCD; None where the XCD count is not known."""
    if not device.sm_count:
        return None
    per_xcd = CUS_PER_XCD.get(device.arch)
    if per_xcd is None:
        return c["GRBM_GUI_ACTIVE"]
    xcds, rest = divmod(device.sm_count, per_xcd)
    return c["GRBM_GUI_ACTIVE"] / xcds if xcds and not rest else None


def _cu_busy(counter: str) -> Callable[[Counters, DeviceInfo], float | None]:
    """100 x ``counter`` / (cycles per XCD x CUs): the share of every CU's cycles it counts."""

    def busy(c: Counters, device: DeviceInfo) -> float | None:
        cycles = _cycles_per_xcd(c, device)
        return None if cycles is None else _percent(c[counter], cycles * (device.sm_count or 0))

    return busy


def _l2_busy(c: Counters, device: DeviceInfo) -> float | None:
    return _percent(c["TCC_BUSY_sum"], L2_CHANNELS_PER_XCD[device.arch] * c["GRBM_GUI_ACTIVE"])


ATOMIC_REQUESTS = ("TCP_TOTAL_ATOMIC_WITH_RET", "TCP_TOTAL_ATOMIC_WITHOUT_RET")
ATOMIC_WAVEFRONTS = ("TA_FLAT_ATOMIC_WAVEFRONTS_sum", "TA_BUFFER_ATOMIC_WAVEFRONTS_sum")
REQUESTS = ("TCP_TOTAL_ACCESSES_sum", *ATOMIC_REQUESTS)
WAVEFRONTS = ("TA_TOTAL_WAVEFRONTS_sum", *ATOMIC_WAVEFRONTS)


def _requests(c: Counters) -> float:
    """Thread-requests of global loads and stores (all of the TA's, less the atomics')."""
    return max(0.0, c["TCP_TOTAL_ACCESSES_sum"] - sum(c[name] for name in ATOMIC_REQUESTS))


def _ideal_requests(c: Counters) -> float:
    wavefronts = max(0.0, c["TA_TOTAL_WAVEFRONTS_sum"] - sum(c[name] for name in ATOMIC_WAVEFRONTS))
    return min(_requests(c), IDEAL_REQUESTS_PER_WAVEFRONT * wavefronts)


_TABLE: dict[Quantity, _Entry] = {
    Quantity.SHARED_ACCESS_UNITS: _Entry(("SQ_LDS_IDX_ACTIVE",), lambda c, d: c["SQ_LDS_IDX_ACTIVE"]),
    Quantity.SHARED_ACCESS_UNITS_EXCESS: _Entry(
        ("SQ_LDS_BANK_CONFLICT",), lambda c, d: c["SQ_LDS_BANK_CONFLICT"]
    ),
    Quantity.SHARED_ACCESS_UNITS_IDEAL: _Entry(
        ("SQ_LDS_IDX_ACTIVE", "SQ_LDS_BANK_CONFLICT"),
        lambda c, d: max(0.0, c["SQ_LDS_IDX_ACTIVE"] - c["SQ_LDS_BANK_CONFLICT"]),
    ),
    Quantity.SHARED_PIPE_BUSY_PCT: _Entry(
        ("SQ_LDS_IDX_ACTIVE", "GRBM_GUI_ACTIVE"), _cu_busy("SQ_LDS_IDX_ACTIVE")
    ),
    Quantity.ACTIVE_THREADS_PER_INSTRUCTION: _Entry(
        ("SQ_THREAD_CYCLES_VALU", "SQ_ACTIVE_INST_VALU"),
        lambda c, d: _ratio(c["SQ_THREAD_CYCLES_VALU"], c["SQ_ACTIVE_INST_VALU"]),
    ),
    Quantity.ISSUE_BUSY_PCT: _Entry(
        ("SQ_ACTIVE_INST_VALU", "GRBM_GUI_ACTIVE"), _cu_busy("SQ_ACTIVE_INST_VALU")
    ),
    Quantity.WARP_INSTRUCTIONS: _Entry(("SQ_ACTIVE_INST_VALU",), lambda c, d: c["SQ_ACTIVE_INST_VALU"]),
    Quantity.THREAD_INSTRUCTIONS: _Entry(("SQ_THREAD_CYCLES_VALU",), lambda c, d: c["SQ_THREAD_CYCLES_VALU"]),
    Quantity.L1_BUSY_PCT: _Entry(
        ("TCP_GATE_EN1_sum", "TCP_GATE_EN2_sum"),
        lambda c, d: _percent(c["TCP_GATE_EN2_sum"], c["TCP_GATE_EN1_sum"]),
    ),
    Quantity.L2_BUSY_PCT: _Entry(("TCC_BUSY_sum", "GRBM_GUI_ACTIVE"), _l2_busy),
    Quantity.GLOBAL_SECTORS: _Entry(REQUESTS, lambda c, d: _requests(c)),
    Quantity.GLOBAL_SECTORS_IDEAL: _Entry((*REQUESTS, *WAVEFRONTS), lambda c, d: _ideal_requests(c)),
    Quantity.GLOBAL_SECTORS_EXCESS: _Entry(
        (*REQUESTS, *WAVEFRONTS), lambda c, d: _requests(c) - _ideal_requests(c)
    ),
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


def launch_quantities(resources: KernelResources) -> dict[str, float]:
    """The quantities the kernel trace gives for a kernel's launch: VGPRs per work-item, workgroup and grid
    sizes (rocprofv3 counts the grid in work-items; the formulas count blocks)."""
    found: dict[str, float] = {}
    if resources.vgpr_count is not None:
        found[Quantity.REGISTERS_PER_THREAD.value] = float(resources.vgpr_count)
    if resources.workgroup_size is not None:
        x, y, z = resources.workgroup_size
        found[Quantity.BLOCK_SIZE.value] = float(x * y * z)
        if resources.grid_size is not None:
            gx, gy, gz = resources.grid_size  # work-items on AMD
            threads = x * y * z
            found[Quantity.GRID_SIZE.value] = float(-(-gx * gy * gz // threads)) if threads else 0.0
    return found

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
- Occupancy (the occupancy formula's launch statistics and achieved occupancy), with the CDNA facts of
  intelliperf.contract.gpu_facts (documentation values, not measured here):
  - SM count: the device's CU count (amd-smi); left out where the probe gave none (rocm-smi).
  - Shared memory per block: the kernel trace's LDS_Block_Size (Group_Segment_Size before 2025-05).
  - Blocks per SM by registers, after LLVM's occupancy calculation (AMDGPUBaseInfo.cpp
    getNumWavesPerEUWithNumVGPRs): on gfx90a and gfx942 the architected VGPRs and the AGPRs share one file
    of 512 VGPRs per lane of each SIMD, so a wave takes VGPR_Count + Accum_VGPR_Count (rocprofiler-sdk's
    code_object.cpp reports the architected count aligned to 4, from ACCUM_OFFSET, and the AGPRs as the
    rest of the allocation: the two add up to it). Waves per SIMD by registers = floor(512 / roundup(VGPRs,
    8)), at most the SIMD's 8 wave slots; the CU holds 4 times that, and the workgroups by registers are
    those waves over a workgroup's waves, which may take slots on any of the CU's SIMDs (the model of
    NVIDIA's occupancy_limit_registers for its sub-partitions; for a multiple of 4 waves it equals spreading
    each workgroup evenly over the 4 SIMDs, and how the workgroup manager places other sizes is not
    documented). SGPRs (7 waves per SIMD above 100) are not modelled. A missing count, or a sum beyond the
    file (rocprofiler-sdk of 2024-10 computed Accum_VGPR_Count as (blocks + 1) x (8 - architected VGPRs),
    which wraps around), leaves the limit out.
  - Achieved occupancy: rocprofv3's own derived counter MeanOccupancyPerCU (counter_defs.yaml, gfx90a and
    gfx942: reduce(accumulate(SQ_LEVEL_WAVES, HIGH_RES), sum) / reduce(GRBM_GUI_ACTIVE, max) / CU_NUM),
    the waves resident per CU averaged over the GPU's busy cycles, as a share of a CU's 32 wave slots. It
    is rocprof-compute's Wavefront Occupancy over the CU count: SQ_ACCUM_PREV_HIRES accumulating the
    SQ_LEVEL_WAVES of the same pass (profile_configs/gfx940/pmc_sq_perf8.txt) over GRBM_GUI_ACTIVE per XCD,
    which under rocprofv3 rocprof-compute defines as accumulate(SQ_LEVEL_WAVES, HIGH_RES)
    (profile_configs/accum_counters.yaml), one accumulate counter per pass, as here. rocprofv3 takes the
    busiest XCD's GRBM_GUI_ACTIVE itself, so no XCD count is needed (an MI308X gets it too). Caveat: it
    averages over every CU, where NVIDIA's achieved occupancy averages over the cycles each SM had warps, so
    for a grid smaller than the CU count the formula's sm_spread counts the idle CUs twice (as for the issue
    slots, over every CU on AMD too) and overestimates the saving. MeanOccupancyPerActiveCU would be the
    counterpart, but its definition leaves open whether SQ_BUSY_CU_CYCLES counts CUs or SIMDs (waves per
    CU or per SIMD).
- Not mapped (the formulas that need them say they could not decide): local (scratch) traffic, since no
  counter documented for gfx942 counts scratch accesses (gfx90a's buffer instructions are spills only by
  convention) and Scratch_Size is an allocation, not traffic; DRAM utilization; L2 reuse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from intelliperf.contract import DeviceInfo
from intelliperf.contract.gpu_facts import GpuFacts, UnknownArchitectureError, facts_for
from intelliperf.contract.profile import Quantity
from intelliperf.gpu.amd.rocprof import KernelResources

__all__ = [
    "COUNTER_GROUPS",
    "counters_for",
    "kernel_quantities",
    "launch_quantities",
    "supported",
    "waves_per_simd_by_registers",
    "workgroups_per_cu_by_registers",
]

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
    ("MeanOccupancyPerCU",),
)
"""The counters, in groups that each fit one rocprofv3 pass (one run per group). MeanOccupancyPerCU
accumulates SQ_LEVEL_WAVES every cycle: an accumulate counter gets a pass of its own."""

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


def _facts(device: DeviceInfo) -> GpuFacts | None:
    try:
        return facts_for(device.arch)
    except UnknownArchitectureError:
        return None


def _achieved_occupancy(c: Counters, device: DeviceInfo) -> float | None:
    """MeanOccupancyPerCU, the waves resident per CU, as a percentage of the CU's wave slots."""
    facts = _facts(device)
    return None if facts is None else _percent(c["MeanOccupancyPerCU"], facts.max_warps_per_sm)


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
    Quantity.ACHIEVED_OCCUPANCY_PCT: _Entry(("MeanOccupancyPerCU",), _achieved_occupancy),
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


def waves_per_simd_by_registers(vgprs: int, facts: GpuFacts) -> int | None:
    """The wavefronts one SIMD can hold by its VGPRs: the VGPRs of one lane of the SIMD's file over the
    wave's VGPRs (architected and AGPRs together) rounded up to the allocation granule, at most the SIMD's
    wave slots. None where the count is not a possible allocation or the register facts are not known."""
    per_cu, unit, simds = facts.registers_per_sm, facts.register_allocation_unit, facts.register_partitions
    if per_cu is None or unit is None or simds is None or vgprs <= 0:
        return None
    per_lane = per_cu // simds // facts.warp_size
    granule = unit // facts.warp_size
    allocated = -(-vgprs // granule) * granule
    if allocated > per_lane:
        return None
    return min(facts.max_warps_per_sm // simds, per_lane // allocated)


def workgroups_per_cu_by_registers(vgprs: int, workgroup_threads: int, facts: GpuFacts) -> int | None:
    """The workgroups one CU can hold by VGPRs: the waves its SIMDs hold by registers over the waves of a
    workgroup (a workgroup's waves taking slots on any of the CU's SIMDs), at most the CU's workgroups."""
    per_simd = waves_per_simd_by_registers(vgprs, facts)
    simds, most = facts.register_partitions, facts.max_blocks_per_sm
    if per_simd is None or simds is None or most is None or workgroup_threads <= 0:
        return None
    waves = -(-workgroup_threads // facts.warp_size)
    return min(most, per_simd * simds // waves)


def _unified_vgprs(resources: KernelResources) -> int | None:
    """VGPR_Count + Accum_VGPR_Count: one register file holds both on gfx90a and gfx942."""
    if resources.vgpr_count is None or resources.accum_vgpr_count is None:
        return None
    return resources.vgpr_count + resources.accum_vgpr_count


def launch_quantities(resources: KernelResources, device: DeviceInfo) -> dict[str, float]:
    """The quantities the kernel trace and the device give for a kernel's launch: VGPRs per work-item, LDS
    per workgroup, workgroup and grid sizes (rocprofv3 counts the grid in work-items; the formulas count
    blocks), the CU count and the workgroups a CU holds by registers. One that is not known is left out."""
    found: dict[str, float] = {}
    if device.sm_count:
        found[Quantity.SM_COUNT.value] = float(device.sm_count)
    if resources.lds_bytes is not None:
        found[Quantity.SHARED_BYTES_PER_BLOCK.value] = float(resources.lds_bytes)
    if resources.vgpr_count is not None:
        found[Quantity.REGISTERS_PER_THREAD.value] = float(resources.vgpr_count)
    if resources.workgroup_size is not None:
        x, y, z = resources.workgroup_size
        threads = x * y * z
        found[Quantity.BLOCK_SIZE.value] = float(threads)
        if resources.grid_size is not None:
            gx, gy, gz = resources.grid_size  # work-items on AMD
            found[Quantity.GRID_SIZE.value] = float(-(-gx * gy * gz // threads)) if threads else 0.0
        vgprs, facts = _unified_vgprs(resources), _facts(device)
        if vgprs is not None and facts is not None:
            blocks = workgroups_per_cu_by_registers(vgprs, threads, facts)
            if blocks is not None:
                found[Quantity.BLOCKS_PER_SM_BY_REGISTERS.value] = float(blocks)
    return found

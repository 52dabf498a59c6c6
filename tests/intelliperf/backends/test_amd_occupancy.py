"""The occupancy formula's quantities on AMD: the workgroups a CU holds by VGPRs (AGPRs included), the LDS per
workgroup, the CU count and rocprofv3's MeanOccupancyPerCU, with the CDNA facts (intelliperf.contract.
gpu_facts, documentation values). NOT YET RUN ON AMD HARDWARE: the rocprofv3 rows below are hand-made in
its documented CSV format (the headers of tests/fixtures/amd/rocprofv3), not recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from formulas.occupancy import Occupancy, residency
from formulas.selection import metrics_for
from intelliperf.contract import DeviceInfo
from intelliperf.contract.gpu_facts import facts_for
from intelliperf.contract.profile import KernelProfile, Quantity
from intelliperf.gpu.amd.backend import AmdBackend
from intelliperf.gpu.amd.counters import (
    COUNTER_GROUPS,
    counters_for,
    kernel_quantities,
    launch_quantities,
    waves_per_simd_by_registers,
    workgroups_per_cu_by_registers,
)
from intelliperf.gpu.amd.rocprof import KernelResources
from intelliperf.gpu.backend import rank_kernels
from tests.support.fake_rocprof import ROCPROF_FIXTURES, install_fake_rocprofv3

MI300X = DeviceInfo(vendor="amd", name="AMD Instinct MI300X", arch="gfx942", sm_count=304, warp_size=64)
MI250X_GCD = MI300X.model_copy(update={"name": "AMD Instinct MI250X", "arch": "gfx90a", "sm_count": 110})
MI308X = MI300X.model_copy(update={"name": "AMD Instinct MI308X", "sm_count": 80})  # 80 / 38: no XCD count
CDNA3 = facts_for("gfx942")


def resources(
    vgprs: int | None = 32, agprs: int | None = 0, lds: int | None = 0, threads: int = 256, grid: int = 4096
) -> KernelResources:
    """A kernel trace's resource columns: ``grid`` workgroups of ``threads`` work-items."""
    return KernelResources(
        vgpr_count=vgprs,
        accum_vgpr_count=agprs,
        sgpr_count=32,
        lds_bytes=lds,
        scratch_bytes=0,
        workgroup_size=(threads, 1, 1),
        grid_size=(grid * threads, 1, 1),
    )


@pytest.mark.parametrize("arch", ["gfx90a", "gfx942"])
@pytest.mark.parametrize(
    ("vgprs", "waves"),
    [
        (8, 8),  # the file would hold 64 waves: the SIMD's 8 slots cap it
        (64, 8),  # 512 / 64, exactly the slots
        (65, 7),  # rounded up to 72: one granule more costs a wave
        (72, 7),
        (73, 6),
        (128, 4),
        (129, 3),  # 136
        (256, 2),
        (257, 1),  # 264
        (512, 1),  # the whole file
        (513, None),  # more than a lane's file: not an allocation
        (0, None),
    ],
)
def test_waves_per_simd_by_registers_at_the_granule_edges(arch: str, vgprs: int, waves: int | None) -> None:
    assert waves_per_simd_by_registers(vgprs, facts_for(arch)) == waves


@pytest.mark.parametrize(
    ("vgprs", "threads", "workgroups"),
    [
        (128, 256, 4),  # 4 waves per SIMD, 16 per CU, workgroups of 4 waves
        (129, 256, 3),  # 3 per SIMD: 12 per CU
        (64, 256, 8),  # 32 per CU: every wave slot
        (128, 1024, 1),  # 16 waves per CU, one workgroup of 16
        (129, 1024, 0),  # 12 waves per CU cannot hold a workgroup of 16
        (8, 64, 32),  # one-wave workgroups: one per wave slot
        (64, 320, 6),  # 5 waves a workgroup: 32 // 5
        (256, 100, 4),  # 100 work-items take 2 whole waves; 8 per CU
    ],
)
def test_workgroups_per_cu_by_registers(vgprs: int, threads: int, workgroups: int) -> None:
    assert workgroups_per_cu_by_registers(vgprs, threads, CDNA3) == workgroups


def test_the_launch_gives_the_cu_count_lds_and_workgroups_by_unified_vgprs_and_agprs() -> None:
    found = launch_quantities(resources(vgprs=128, agprs=136, lds=4608), MI300X)
    assert found[Quantity.SM_COUNT] == 304
    assert found[Quantity.SHARED_BYTES_PER_BLOCK] == 4608
    assert found[Quantity.REGISTERS_PER_THREAD] == 128  # the architected VGPRs, as the trace names them
    # 128 + 136 = 264 VGPRs of the one file: 1 wave per SIMD, 4 per CU, one workgroup of 4 waves
    assert found[Quantity.BLOCKS_PER_SM_BY_REGISTERS] == 1
    assert launch_quantities(resources(vgprs=128, agprs=0), MI300X)[Quantity.BLOCKS_PER_SM_BY_REGISTERS] == 4
    assert launch_quantities(resources(vgprs=128, agprs=0), MI250X_GCD)[Quantity.SM_COUNT] == 110


def test_what_the_launch_does_not_tell_is_left_out() -> None:
    no_agprs = launch_quantities(resources(agprs=None), MI300X)  # a trace without Accum_VGPR_Count
    assert Quantity.BLOCKS_PER_SM_BY_REGISTERS not in no_agprs
    assert no_agprs[Quantity.REGISTERS_PER_THREAD] == 32
    wrapped = launch_quantities(resources(vgprs=12, agprs=2**32 - 4), MI300X)  # (blocks + 1) x (8 - 12)
    assert Quantity.BLOCKS_PER_SM_BY_REGISTERS not in wrapped
    older = launch_quantities(resources(vgprs=None, agprs=None, lds=None), MI300X)  # ROCm 6.2's columns
    assert Quantity.SHARED_BYTES_PER_BLOCK not in older and Quantity.BLOCKS_PER_SM_BY_REGISTERS not in older
    no_cus = launch_quantities(resources(), MI300X.model_copy(update={"sm_count": None}))  # rocm-smi
    assert Quantity.SM_COUNT not in no_cus and no_cus[Quantity.BLOCKS_PER_SM_BY_REGISTERS] == 8
    rdna = launch_quantities(resources(), MI300X.model_copy(update={"arch": "gfx1100"}))  # no facts
    assert Quantity.BLOCKS_PER_SM_BY_REGISTERS not in rdna


def test_achieved_occupancy_is_mean_occupancy_per_cu_over_the_cus_wave_slots_on_any_xcd_count() -> None:
    """MeanOccupancyPerCU divides by the busiest XCD's cycles inside rocprofv3, so the XCD count that the
    utilizations need (GRBM_GUI_ACTIVE summed over XCDs) is not needed: an MI308X, whose 80 CUs are no whole
    number of 38-CU XCDs, has no issue utilization but an achieved occupancy."""
    counters = {"MeanOccupancyPerCU": 8.0, "SQ_ACTIVE_INST_VALU": 3800.0, "GRBM_GUI_ACTIVE": 1600.0}
    mi300x, mi308x = kernel_quantities(counters, MI300X), kernel_quantities(counters, MI308X)
    assert mi300x[Quantity.ACHIEVED_OCCUPANCY_PCT] == pytest.approx(25.0)  # 8 of 32 waves
    assert mi308x[Quantity.ACHIEVED_OCCUPANCY_PCT] == pytest.approx(25.0)
    assert Quantity.ISSUE_BUSY_PCT in mi300x and Quantity.ISSUE_BUSY_PCT not in mi308x
    assert kernel_quantities({"MeanOccupancyPerCU": 30.4}, MI250X_GCD)[
        Quantity.ACHIEVED_OCCUPANCY_PCT
    ] == pytest.approx(95.0)
    assert Quantity.ACHIEVED_OCCUPANCY_PCT not in kernel_quantities({"SQ_WAVES": 64.0}, MI300X)
    rdna = MI300X.model_copy(update={"arch": "gfx1100"})
    assert Quantity.ACHIEVED_OCCUPANCY_PCT not in kernel_quantities(counters, rdna)


def test_the_occupancy_counter_has_a_pass_of_its_own_and_the_launch_needs_none() -> None:
    assert ("MeanOccupancyPerCU",) in COUNTER_GROUPS
    assert counters_for([Quantity.ACHIEVED_OCCUPANCY_PCT]) == [("MeanOccupancyPerCU",)]
    launch = [Quantity.SM_COUNT, Quantity.SHARED_BYTES_PER_BLOCK, Quantity.BLOCKS_PER_SM_BY_REGISTERS]
    assert counters_for(launch) == []
    needed = {name for group in counters_for(metrics_for([Occupancy()])) for name in group}
    assert {"MeanOccupancyPerCU", "SQ_ACTIVE_INST_VALU", "TCP_GATE_EN2_sum", "TCC_BUSY_sum"} <= needed


# ----------------------------------------------------------------------------------------------------------
# End to end: rocprofv3's CSV rows (hand-made, documented format) through the AMD backend to the formula

CYCLES_PER_XCD = 210000  # 100 us at 2.1 GHz
XCDS = 8
KERNELS = {
    # name: (VGPRs, AGPRs, workgroups of 256, MeanOccupancyPerCU, VALU busy, L1 busy, L2 busy)
    "mfma_accumulate(float*, float const*)": (128, 136, 4096, 3.6, 0.20, 0.30, 0.25),
    "tiny_grid(float*, int)": (32, 0, 64, 0.8, 0.10, 0.10, 0.05),
    "well_occupied(float*, float const*, int)": (32, 0, 16384, 27.2, 0.30, 0.40, 0.35),
}


def counter_values(occupancy: float, valu: float, l1: float, l2: float) -> dict[str, float]:
    """What the documented expressions turn into these utilizations on an MI300X (counters.py)."""
    grbm = XCDS * CYCLES_PER_XCD
    return {
        "GRBM_GUI_ACTIVE": grbm,
        "SQ_ACTIVE_INST_VALU": valu * CYCLES_PER_XCD * 304,
        "TCP_GATE_EN1_sum": 304.0 * CYCLES_PER_XCD,
        "TCP_GATE_EN2_sum": l1 * 304 * CYCLES_PER_XCD,
        "TCC_BUSY_sum": l2 * 16 * grbm,
        "MeanOccupancyPerCU": occupancy,
    }


def write_rocprofv3_files(folder: Path, groups: list[tuple[str, ...]]) -> None:
    """One dispatch per kernel, each 100 us long, in the fixtures' headers; counters the test does not set
    (LDS, TA) are 0."""
    trace_header = (ROCPROF_FIXTURES / "kernel_trace.csv").read_text().splitlines()[0]
    counter_header = (ROCPROF_FIXTURES / "counter_collection.csv").read_text().splitlines()[0]
    trace, counters = [trace_header], [counter_header]
    for dispatch, (name, (vgprs, agprs, grid, occupancy, valu, l1, l2)) in enumerate(KERNELS.items(), 1):
        start = 3200099838431081 + dispatch * 1000000
        end = start + 100000
        trace.append(
            f'"KERNEL_DISPATCH","Agent 4",1,1,834304,{dispatch},{dispatch},"{name}",{dispatch},{start},{end},'
            f"0,0,{vgprs},{agprs},32,256,1,1,{grid * 256},1,1"
        )
        values = counter_values(occupancy, valu, l1, l2)
        for counter in (c for group in groups for c in group):
            counters.append(
                f'{dispatch},{dispatch},"Agent 4",1,834304,834304,{grid * 256},{dispatch},"{name}",256,0,0,'
                f'{vgprs},{agprs},32,"{counter}",{values.get(counter, 0.0):f},{start},{end}'
            )
    (folder / "kernel_trace.csv").write_text("\n".join(trace) + "\n")
    (folder / "counter_collection.csv").write_text("\n".join(counters) + "\n")


@pytest.fixture
def occupancy_profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, KernelProfile]:
    metrics = metrics_for([Occupancy()])
    fixtures = tmp_path / "rocprofv3"
    fixtures.mkdir()
    write_rocprofv3_files(fixtures, counters_for(metrics))
    install_fake_rocprofv3(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_ROCPROF_FIXTURES", str(fixtures))
    backend = AmdBackend(device=MI300X)
    kernels = rank_kernels(backend.time_kernels(["true"], cwd=tmp_path, timeout_s=60).kernels)
    profiles = backend.collect(["true"], cwd=tmp_path, kernels=kernels, metrics=metrics, timeout_s=60)
    return {name.split("(")[0]: profile for name, profile in profiles.items()}


def test_the_backend_builds_the_occupancy_quantities_from_rocprofv3_rows(
    occupancy_profiles: dict[str, KernelProfile],
) -> None:
    mfma = occupancy_profiles["mfma_accumulate"].metrics
    assert mfma[Quantity.SM_COUNT] == 304 and mfma[Quantity.SHARED_BYTES_PER_BLOCK] == 0
    assert mfma[Quantity.BLOCKS_PER_SM_BY_REGISTERS] == 1 and mfma[Quantity.GRID_SIZE] == 4096
    assert mfma[Quantity.ACHIEVED_OCCUPANCY_PCT] == pytest.approx(100 * 3.6 / 32)
    assert mfma[Quantity.ISSUE_BUSY_PCT] == pytest.approx(20.0)
    assert mfma[Quantity.L1_BUSY_PCT] == pytest.approx(30.0)
    assert mfma[Quantity.L2_BUSY_PCT] == pytest.approx(25.0)
    assert occupancy_profiles["tiny_grid"].metrics[Quantity.BLOCKS_PER_SM_BY_REGISTERS] == 8


def test_the_occupancy_formula_decides_on_amd(occupancy_profiles: dict[str, KernelProfile]) -> None:
    """264 VGPRs (128 + 136 AGPRs) leave one workgroup of 4 waves per CU, 12.5% of its slots, and 11% are
    achieved with the L1 30% busy: saving = 1 - 0.30 / 0.85. 64 workgroups on 304 CUs reach 2.6% of the GPU's
    slots. 8 workgroups per CU with 85% achieved are no occupancy bottleneck."""
    formula = Occupancy()
    mfma = formula.evaluate(occupancy_profiles["mfma_accumulate"])
    assert mfma.decided and mfma.present
    assert residency(occupancy_profiles["mfma_accumulate"], CDNA3).limiter == "registers"
    assert mfma.metrics["theoretical_occupancy"] == 0.125 and mfma.metrics["blocks_per_sm"] == 1
    assert mfma.estimated_saving_fraction == pytest.approx(1 - 0.30 / 0.85, abs=1e-3)
    tiny = formula.evaluate(occupancy_profiles["tiny_grid"])
    assert tiny.decided and tiny.present
    assert residency(occupancy_profiles["tiny_grid"], CDNA3).limiter == "grid"
    assert tiny.metrics["reachable_occupancy"] == pytest.approx(64 * 4 / (304 * 32), abs=1e-4)
    busy = formula.evaluate(occupancy_profiles["well_occupied"])
    assert busy.decided and not busy.present
    assert busy.metrics["theoretical_occupancy"] == 1.0 and busy.metrics["achieved_occupancy"] == 0.85

"""The NVIDIA backend's table: quantities as Nsight Compute metrics per architecture, columns, kinds."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from benchmarks.ncu.pages import RAW_PAGE, parse_raw_csv
from benchmarks.ncu.profiles import semantic_instruction
from formulas.selection import formulas_for, metrics_for
from intelliperf.contract.gpu_facts import facts_for
from intelliperf.contract.profile import Column, Instruction, KernelProfile, Kind, Quantity
from intelliperf.gpu.nvidia.metrics import (
    LAUNCH_METRICS,
    access_bytes,
    cupti_instruction,
    instruction_kind,
    kernel_metrics,
    kernel_quantities,
    launch_metrics,
    occupancy_limit_registers,
    range_profiler_metrics,
)
from tests.recorded import NCU_PAGED_EXAMPLES, RECORDED, main_profile

PCT = ".avg.pct_of_peak_sustained_elapsed"


def test_sm90_reads_the_busiest_sub_unit_and_other_architectures_the_breakdown_metric() -> None:
    raw = {
        "lts__ltcfabric2ltc_cycles_active" + PCT: 69.0,
        "lts__t_tag_requests" + PCT: 26.9,
        "lts__throughput" + PCT: 55.0,
    }
    assert kernel_quantities(raw, (), "sm_90")[Quantity.L2_BUSY_PCT] == pytest.approx(69.0)
    assert kernel_quantities(raw, (), "sm_80")[Quantity.L2_BUSY_PCT] == pytest.approx(55.0)
    assert Quantity.L1_BUSY_PCT not in kernel_quantities(raw, (), "sm_90")  # no L1 metric: unknown


def test_the_counter_pass_asks_for_the_architectures_metrics() -> None:
    wanted = metrics_for(formulas_for("auto"))
    on_hopper = kernel_metrics(wanted, "sm_90")
    assert "lts__xbar2lts_cycles_active" + PCT in on_hopper
    assert "lts__throughput" + PCT not in on_hopper and "l1tex__throughput" + PCT not in on_hopper
    elsewhere = kernel_metrics(wanted, "sm_89")
    assert "lts__throughput" + PCT in elsewhere and "lts__xbar2lts_cycles_active" + PCT not in elsewhere
    bank = kernel_metrics(metrics_for(formulas_for("bankConflict")), "sm_90")
    assert "dram__throughput" + PCT in bank  # what the fix leaves alone bounds its saving
    assert "l1tex__data_pipe_lsu_wavefronts" + PCT not in bank  # L1 carries the conflicts: not a bound
    assert len(on_hopper) == len(set(on_hopper))


def test_n_a_is_absent_alternatives_take_the_largest_and_sums_need_every_part() -> None:
    raw = {
        "smsp__inst_executed_op_global_atom.sum": math.nan,  # n/a on sm_90
        "smsp__sass_inst_executed_op_global_atom.sum": 50.0,  # not asked for: a replay pass of its own
        "smsp__inst_executed_op_generic_atom.sum": 41.0,
        "lts__t_sectors_op_red.max": 100.0,
        "lts__t_sectors_op_atom.max": 5.0,
        "lts__t_sectors_op_red.avg": 2.0,
        "smsp__inst_executed_op_global_red.sum": math.nan,
    }
    found = kernel_quantities(raw, (), "sm_90")
    assert found[Quantity.ATOMIC_INSTRUCTIONS_RETURN] == 41.0
    assert found[Quantity.L2_ATOMICS_BUSIEST_SLICE] == 105.0
    assert Quantity.L2_ATOMICS_MEAN_SLICE not in found  # one part missing: no sum
    assert Quantity.ATOMIC_INSTRUCTIONS_NO_RETURN not in found  # n/a is not 0


def test_instruction_totals_need_instructions_and_count_a_missing_column_as_none_of_it() -> None:
    load = semantic_instruction(
        Instruction(
            "0x10",
            "@P0 LDG.E.64 R2, desc[UR4][R2.64]",
            {
                "Instructions Executed": 8.0,
                "L2 Theoretical Sectors Global Ideal": 16.0,
                "L2 Theoretical Sectors Global": 64.0,
            },
        )
    )
    store = semantic_instruction(
        Instruction(
            "0x20",
            "STG.E [R4], R6",
            {"Instructions Executed": 8.0, "L2 Theoretical Sectors Global Ideal": 8.0},
        )
    )
    assert load.kind is Kind.GLOBAL_LOAD and store.kind is Kind.GLOBAL_STORE
    assert load.metrics == {
        Column.EXECUTED: 8.0,
        Column.GLOBAL_SECTORS_IDEAL: 16.0,
        Column.GLOBAL_SECTORS: 64.0,
    }
    found = kernel_quantities({}, (load, store), "sm_90")
    assert found[Quantity.GLOBAL_SECTORS_IDEAL] == 24.0
    assert found[Quantity.GLOBAL_LOAD_SECTORS_IDEAL] == 16.0
    assert found[Quantity.GLOBAL_SECTORS] == 64.0
    assert found[Quantity.SHARED_ACCESS_UNITS_EXCESS] == 0.0
    assert Quantity.GLOBAL_SECTORS not in kernel_quantities({}, (), "sm_90")


@pytest.mark.parametrize(
    ("sass", "kind"),
    [
        ("@P0 REDG.E.ADD.F32.FTZ.RN.STRONG.GPU [R2.64], R5", Kind.GLOBAL_ATOMIC),
        ("ATOMG.E.ADD.STRONG.GPU PT, R4, [R2.64], R5", Kind.GLOBAL_ATOMIC),
        ("ATOM.E.ADD.STRONG.GPU PT, R4, [R2.64], R5", Kind.GLOBAL_ATOMIC),
        ("ATOMS.ADD R4, [R2], R5", Kind.SHARED_ACCESS),
        ("REDUX.SUM UR4, R2", Kind.OTHER),
        ("LDS R5, [R2]", Kind.SHARED_ACCESS),
        ("LDL R5, [R1+0x10]", Kind.LOCAL_LOAD),
        ("STL [R1+0x10], R5", Kind.LOCAL_STORE),
        ("FFMA R1, R2, R3, R4", Kind.OTHER),
    ],
)
def test_instruction_kinds_from_sass(sass: str, kind: Kind) -> None:
    assert instruction_kind(sass) is kind


def test_every_quantity_has_a_source_on_hopper() -> None:
    assert kernel_metrics(list(Quantity), "sm_90")


@pytest.mark.parametrize("arch", ["sm_90", "sm_89"])
def test_no_kernel_level_sass_patched_metric_is_asked_for(arch: str) -> None:
    """smsp__sass_* metrics opened a replay pass of their own beside the source section's (6 passes per
    kernel on an H100 with them, 5 without); the section's columns measure the same."""
    assert not [name for name in kernel_metrics(list(Quantity), arch) if name.startswith("smsp__sass_")]


def test_bytes_used_per_sector_is_the_loads_ideal_sectors_over_their_sectors() -> None:
    def load(ideal: float, sectors: float) -> Instruction:
        columns = {"L2 Theoretical Sectors Global Ideal": ideal, "L2 Theoretical Sectors Global": sectors}
        return semantic_instruction(Instruction("0x10", "LDG.E R2, desc[UR4][R2.64]", columns))

    store = semantic_instruction(
        Instruction("0x20", "STG.E [R4], R6", {"L2 Theoretical Sectors Global Ideal": 8.0})
    )
    found = kernel_quantities({}, (load(4.0, 32.0), load(4.0, 4.0), store), "sm_90")
    assert found[Quantity.BYTES_USED_PER_SECTOR_PCT] == pytest.approx(100.0 * 8.0 / 36.0)
    # A kernel without global loads has no such percentage (ncu printed 0 for it: that is not a measurement).
    assert Quantity.BYTES_USED_PER_SECTOR_PCT not in kernel_quantities({}, (store,), "sm_90")


def recorded_kernels(example: str) -> Iterator[tuple[KernelProfile, dict[str, float]]]:
    """The example's kernel in its original and fixed recordings, profiled as the backend does, with the
    raw page's metrics as recorded."""
    for variant in ("original", "fixed"):
        raw = parse_raw_csv((RECORDED / example / variant / RAW_PAGE).read_text())
        kernel = main_profile(example, variant)
        yield kernel, next(entry.metrics for entry in raw if entry.name == kernel.name)


@pytest.mark.parametrize("example", NCU_PAGED_EXAMPLES)
def test_the_source_sections_loads_give_what_ncus_sass_counters_gave_on_every_recorded_kernel(
    example: str,
) -> None:
    for kernel, recorded in recorded_kernels(example):
        bytes_per_sector = recorded["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct"]
        derived = kernel.optional(Quantity.BYTES_USED_PER_SECTOR_PCT)
        if derived is None:
            loads = kernel.instruction_total(Column.GLOBAL_SECTORS, lambda i: i.kind is Kind.GLOBAL_LOAD)
            assert bytes_per_sector == 0.0 and loads == 0.0
        else:
            assert derived == pytest.approx(bytes_per_sector, abs=0.1)
        sass_atomics = recorded.get("smsp__sass_inst_executed_op_global_atom.sum")
        if sass_atomics:
            assert kernel.metric(Quantity.ATOMIC_INSTRUCTIONS_RETURN) == sass_atomics


@pytest.mark.parametrize("arch", ["sm_90", "sm_89"])
def test_no_l1_bytes_or_hit_rate_metric_is_asked_for(arch: str) -> None:
    """They opened a replay pass of their own (5 passes per kernel on an H100 with them, 4 without); the
    section's columns give the bytes, and no formula decides from the hit rates."""
    names = kernel_metrics(list(Quantity), arch)
    assert not [name for name in names if name.startswith("l1tex__t_bytes") or "hit_rate" in name]


@pytest.mark.parametrize(
    ("sass", "width"),
    [
        ("LDL R2, [R1+0x4]", 4),
        ("@!P0 LDL.64 R2, [R1+0x8]", 8),
        ("STL.128 [R1], R4", 16),
        ("LDL.LU.64 R6, [R1+0x10]", 8),
        ("STL.U8 [R1+0x3], R2", 1),
        ("LDL.S16 R2, [R1]", 2),
        ("LDG.E.128.CONSTANT R4, desc[UR4][R2.64]", 16),
        ("STG.E [R4.64], R6", 4),
    ],
)
def test_access_width_from_the_opcode(sass: str, width: int) -> None:
    assert access_bytes(sass) == width


LOCAL_AND_GLOBAL_BYTES = {
    Quantity.LOCAL_BYTES_LOADED: "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    Quantity.LOCAL_BYTES_STORED: "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    Quantity.GLOBAL_BYTES_LOADED: "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
    Quantity.GLOBAL_BYTES_STORED: "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
}
"""Each memory space's bytes as the source section gives them, and the L1 metric ncu measured them with
when the recordings were made (before the counter pass stopped asking for it)."""


@pytest.mark.parametrize("example", NCU_PAGED_EXAMPLES)
def test_the_source_sections_bytes_per_memory_space_are_ncus_l1_bytes_on_every_recorded_kernel(
    example: str,
) -> None:
    for kernel, recorded in recorded_kernels(example):
        for quantity, metric in LOCAL_AND_GLOBAL_BYTES.items():
            # within 2%: a partly active warp's local store still moves whole sectors (1.6% in one kernel)
            assert kernel.metric(quantity) == pytest.approx(recorded[metric], rel=0.02), (
                kernel.name,
                quantity,
            )


def test_the_occupancy_limit_by_registers_is_nsight_computes_on_every_recorded_kernel() -> None:
    """The CUPTI counter pass computes launch__occupancy_limit_registers from the registers and block size
    (and the H100/H200's 65536 registers and 32 blocks per SM); ncu measured it on every recorded kernel."""
    seen = 0
    for page in sorted(RECORDED.glob(f"**/{RAW_PAGE}")):
        for kernel in parse_raw_csv(page.read_text()):
            m = kernel.metrics
            if "launch__occupancy_limit_registers" not in m:
                continue
            limit = occupancy_limit_registers(
                int(m["launch__registers_per_thread"]),
                int(m["launch__block_size"]),
                facts=facts_for("sm_90"),
            )
            assert limit == m["launch__occupancy_limit_registers"], (page, kernel.name)
            seen += 1
    assert seen > 60
    assert occupancy_limit_registers(0, 256, facts=facts_for("sm_90")) is None
    assert occupancy_limit_registers(40, 256, facts=None) is None  # an architecture the table lacks


def test_launch_metrics_leave_out_what_the_driver_did_not_say() -> None:
    known = launch_metrics(
        (8, 2, 1),
        (128, 2, 1),
        40,
        facts=facts_for("sm_90"),
        sm_count=132,
        static_shared=4096,
        dynamic_shared=0,
    )
    assert known == {
        "launch__grid_size": 16.0,
        "launch__block_size": 256.0,
        "launch__registers_per_thread": 40.0,
        "launch__occupancy_limit_registers": 6.0,
        "launch__sm_count": 132.0,
        "launch__shared_mem_per_block_static": 4096.0,
        "launch__shared_mem_per_block_dynamic": 0.0,
    }
    assert (
        launch_metrics((1, 1, 1), (32, 1, 1), 8, facts=facts_for("sm_90"))["launch__registers_per_thread"]
        == 16.0
    )  # the driver's minimum allocation
    unknown = launch_metrics((8, 1, 1), (128, 1, 1), -1, facts=None)
    assert unknown == {"launch__grid_size": 8.0, "launch__block_size": 128.0}


def test_a_cupti_instruction_gets_its_columns_excess_and_kind() -> None:
    counts = {
        "smsp__sass_inst_executed": 10.0,
        "smsp__sass_sectors_mem_global": 80.0,
        "smsp__sass_sectors_mem_global_ideal": 20.0,
        "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared": 0.0,
        "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal": 0.0,
        "smsp__not_a_column": 5.0,
    }
    instruction = cupti_instruction("0x00040", "@P0 LDG.E.64 R2, desc[UR4][R2.64]", counts)
    assert instruction.kind == Kind.GLOBAL_LOAD
    assert instruction.metrics == {
        Column.EXECUTED: 10.0,
        Column.GLOBAL_SECTORS: 80.0,
        Column.GLOBAL_SECTORS_IDEAL: 20.0,
        Column.GLOBAL_SECTORS_EXCESS: 60.0,
        Column.SHARED_ACCESS_UNITS: 0.0,
        Column.SHARED_ACCESS_UNITS_IDEAL: 0.0,
        Column.SHARED_ACCESS_UNITS_EXCESS: 0.0,
    }


def test_the_range_profiler_is_asked_for_everything_but_the_launch_statistics() -> None:
    wanted = metrics_for(formulas_for("auto"))
    asked = range_profiler_metrics(wanted, "sm_90")
    assert set(asked) == set(kernel_metrics(wanted, "sm_90")) - set(LAUNCH_METRICS)
    assert "gpu__time_duration.sum" in asked and not any(m.startswith("launch__") for m in asked)

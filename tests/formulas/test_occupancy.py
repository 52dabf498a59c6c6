"""The occupancy formula on recorded profiles: its residency arithmetic against Nsight Compute's own figures,
its edges, where it points, and what it leaves alone."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.ncu.pages import RAW_PAGE, parse_raw_csv
from formulas import occupancy
from formulas.occupancy import Occupancy, residency
from formulas.selection import select
from formulas.throughput import UNIT_QUANTITIES, UNITS
from intelliperf.contract.gpu_facts import facts_for
from intelliperf.contract.kernel_names import function_name
from intelliperf.contract.profile import KernelProfile, Quantity
from tests.recorded import RECORDED, main_profile, replay

formula = Occupancy()


def with_metrics(profile: KernelProfile, **values: float) -> KernelProfile:
    return replace(profile, metrics={**profile.metrics, **{Quantity[k]: v for k, v in values.items()}})


def test_the_constants_are_the_values_held_here() -> None:
    """The model's settings: change them only with this test, and say what was measured."""
    assert occupancy.MAX_OCCUPANCY == 0.25
    assert occupancy.TARGET_OCCUPANCY == 0.5
    assert occupancy.UNIT_PEAK == 0.85
    assert occupancy.MIN_SAVING == 0.10


def test_the_residency_is_nsight_computes_on_every_recorded_kernel() -> None:
    """Blocks per SM by registers, shared memory, warps and the block limit give Nsight Compute's theoretical
    occupancy (sm__maximum_warps_per_active_cycle_pct) and waves (launch__waves_per_multiprocessor, printed
    with two decimals in some pages) for every kernel of the recorded raw pages."""
    seen = 0
    for page in sorted(RECORDED.glob(f"**/{RAW_PAGE}")):
        for kernel in parse_raw_csv(page.read_text()):
            m = kernel.metrics
            if "sm__maximum_warps_per_active_cycle_pct" not in m:
                continue
            profile = KernelProfile(
                name=kernel.name,
                demangled=kernel.name,
                duration_ns=1.0,
                arch="sm_90",
                metrics={
                    Quantity.GRID_SIZE: m["launch__grid_size"],
                    Quantity.BLOCK_SIZE: m["launch__block_size"],
                    Quantity.SM_COUNT: m["launch__sm_count"],
                    Quantity.SHARED_BYTES_PER_BLOCK: m["launch__shared_mem_per_block_static"]
                    + m["launch__shared_mem_per_block_dynamic"],
                    Quantity.BLOCKS_PER_SM_BY_REGISTERS: m["launch__occupancy_limit_registers"],
                },
            )
            shape = residency(profile, facts_for("sm_90"))
            where = (page, kernel.name)
            assert shape.theoretical * 100 == pytest.approx(m["sm__maximum_warps_per_active_cycle_pct"]), (
                where
            )
            assert shape.waves == pytest.approx(m["launch__waves_per_multiprocessor"], abs=0.006), where
            seen += 1
    assert seen >= 70


def test_a_grid_smaller_than_a_wave_is_found_at_its_declaration_and_launch() -> None:
    """small_grid (H200, 2026-11-28): 64 blocks of 8 warps, one per row, on 132 SMs: 0.06 waves, 12.5%
    achieved on the SMs that have a block, 6% of the GPU's warp slots. Its usage comment names the kernel
    (`Usage: normalize_rows [iterations]`) and is not a launch."""
    profile = main_profile("small_grid")
    found = formula.evaluate(profile)
    assert found.present and found.decided
    assert found.metrics["theoretical_occupancy"] == 1.0
    assert found.metrics["reachable_occupancy"] == pytest.approx(64 * 8 / (132 * 64), abs=1e-4)
    assert "grid" in found.summary
    lines = {(Path(loc.file).name, loc.line) for loc in found.locations}
    source = Path("examples/small_grid/normalize_rows.cu").read_text().splitlines()
    declaration = next(n for n, text in enumerate(source, 1) if "void normalize_rows(" in text)
    launch = next(n for n, text in enumerate(source, 1) if "normalize_rows<<<" in text)
    assert lines == {("normalize_rows.cu", declaration), ("normalize_rows.cu", launch)}


def test_a_grid_on_part_of_the_gpu_is_measured_on_the_whole_gpu() -> None:
    """The achieved occupancy and the issue slots are averages over the SMs with work: 64 blocks reach 64 of
    132 SMs, so a fix that fills every SM is measured against 64/132 of them (small_grid's fix measured 92%:
    88% estimated, 75% without the spread). One block per SM or more spreads over the whole GPU."""
    profile = main_profile("small_grid")
    assert occupancy.sm_spread(profile) == pytest.approx(64 / 132)
    assert formula.evaluate(profile).estimated_saving_ns / profile.duration_ns == pytest.approx(
        1 - 64 / 132 * 0.1249 / 0.5, abs=2e-3
    )
    assert occupancy.sm_spread(with_metrics(profile, GRID_SIZE=132.0)) == 1.0
    assert occupancy.sm_spread(with_metrics(profile, GRID_SIZE=131.0)) == pytest.approx(131 / 132)
    assert occupancy.sm_spread(with_metrics(profile, GRID_SIZE=5000.0)) == 1.0


def test_comments_that_name_the_kernel_are_not_its_launches() -> None:
    profile = main_profile("small_grid")
    file = next(iter(profile.source_text))
    text = [
        "// Usage: normalize_rows [iterations]",
        "__global__ void normalize_rows(float* out) {  // intelliperf: occupancy",
        "    normalize_rows<<<64, 256>>>(out);  // one block per row",
        "    // normalize_rows<<<1, 1>>>(out);",
    ]
    shape = occupancy.residency(profile, facts_for("sm_90"))
    found = occupancy.resource_lines(replace(profile, source_text={file: text}), shape)
    assert [loc.line for loc in found] == [2, 3]
    triton = [
        "# launch: normalize_rows[grid](x)",
        "def normalize_rows(x):",
        "    normalize_rows[(132,)](x, num_warps=1)",
        "    rows = normalize_rows [0]",
    ]
    found = occupancy.resource_lines(replace(profile, source_text={"app.py": triton}), shape)
    assert [loc.line for loc in found] == [2, 3]


def test_a_register_limit_beside_spills_is_reported_and_the_spills_dominate() -> None:
    """triton_spill: 255 registers per thread allow 8 one-warp blocks per SM (12.5%); both bottlenecks are
    present, and `auto` takes the larger estimate (the spills) and names the other."""
    report = replay("triton_spill", formula="auto")
    main = main_profile("triton_spill")
    present = {d.formula: d for d in report.diagnoses if d.kernel == main.name and d.present}
    assert set(present) == {"registerPressure", "occupancy"}
    assert "registers" in present["occupancy"].reasoning
    assert present["registerPressure"].estimated_saving_ns > present["occupancy"].estimated_saving_ns
    chosen = select("auto", report.kernels, report.diagnoses)
    assert chosen is not None and chosen.formula == "registerPressure"
    assert "also present: occupancy" in chosen.why


def test_the_reachable_occupancy_edge_is_a_quarter_of_the_warp_slots() -> None:
    """Sixteen one-warp blocks per SM fill exactly 25%: not held back; fifteen are."""
    profile = main_profile("triton_spill")
    assert formula.evaluate(with_metrics(profile, BLOCKS_PER_SM_BY_REGISTERS=15.0)).present
    at = formula.evaluate(with_metrics(profile, BLOCKS_PER_SM_BY_REGISTERS=16.0))
    assert at.decided and not at.present and at.metrics["reachable_occupancy"] == 0.25


@pytest.mark.parametrize(("busy", "present"), [(0.765 * (1 - 1e-9), True), (0.765 * (1 + 1e-9), False)])
def test_the_saving_edge(busy: float, present: bool) -> None:
    """Units 76.5% busy leave 0.85 / 0.765 = 1.111x, a saving of exactly MIN_SAVING: a hair below it is
    present, a hair above it is not."""
    profile = main_profile("triton_spill")
    values = {UNIT_QUANTITIES[unit].name: busy * 100 for unit in UNITS}
    moved = with_metrics(profile, ISSUE_BUSY_PCT=10.0, **values)
    found = formula.evaluate(moved)
    assert found.decided and found.present is present, found.reasoning


def test_many_short_blocks_with_every_slot_reachable_are_not_an_occupancy_bottleneck() -> None:
    """library_sort's make_keys: 17% achieved, but its 124 waves of blocks could fill every slot."""
    found = formula.evaluate(main_profile("library_sort"))
    assert found.decided and not found.present
    assert found.metrics["reachable_occupancy"] == 1.0 and found.metrics["achieved_occupancy"] < 0.25


def test_no_recorded_original_but_the_register_limited_one_is_flagged() -> None:
    """Every recorded example but the four occupancy examples and triton_spill (above) keeps its occupancy,
    and every fixed version: nothing else fires (triton_atomic's fixed version was a true grid limit at 256
    programs; its 2048 programs now fill 1.7 waves)."""
    flagged = set()
    for folder in sorted(RECORDED.glob("*/original")) + sorted(RECORDED.glob("*/fixed")):
        if not list(folder.glob("counters-*.jsonl")):
            continue
        found = formula.evaluate(main_profile(folder.parent.name, folder.name))
        assert found.decided, (folder, found.summary)
        if found.present:
            flagged.add((folder.parent.name, folder.name))
    occupancy_examples = {"small_grid", "register_limited", "spill_occupancy", "triton_few_warps"}
    assert flagged == {(name, "original") for name in occupancy_examples | {"triton_spill"}}


def test_what_is_not_known_is_not_read_as_zero() -> None:
    profile = main_profile("triton_atomic", "fixed")
    metrics = {k: v for k, v in profile.metrics.items() if k != Quantity.SM_COUNT}
    found = formula.evaluate(replace(profile, metrics=metrics))
    assert not found.decided and "sm_count" in found.summary
    rdna = formula.evaluate(replace(profile, arch="gfx1100"))  # no facts written down for RDNA3
    assert not rdna.decided and "gfx1100" in rdna.summary


@pytest.mark.parametrize(
    ("demangled", "name"),
    [
        ("void geom::tile_sums<(int)1>(const float2 *, float *, int)", "tile_sums"),
        ("transpose_tiled(const float *, float *, int, int)", "transpose_tiled"),
        ("bin_sums", "bin_sums"),
    ],
)
def test_the_function_name_is_the_one_the_source_spells(demangled: str, name: str) -> None:
    assert function_name(demangled) == name

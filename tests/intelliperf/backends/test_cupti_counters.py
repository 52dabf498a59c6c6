"""The CUPTI counter pass's records: reading the native profiler's counters files, and turning them with a
cubin's listing into the profiles the formulas read, the same as Nsight Compute's pages of the same binary
give.

The records here are written in the test, in the format profiler/native/FORMAT.md gives, to exercise the
reader's rules; the profile equivalence builds its records from ncu's pages of a real binary
(tests/fixtures/gpu/sass_listing), so both front ends read the same counts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.ncu.pages import parse_raw_csv
from benchmarks.ncu.profiles import build_profiles
from benchmarks.ncu.source import COLUMNS, instructions_from_cuda_sass
from formulas.selection import formulas_for
from intelliperf.contract import RankedKernel
from intelliperf.contract.profile import Column, KernelProfile, Quantity
from intelliperf.errors import ProfileError
from intelliperf.gpu.nvidia.cupti_counters import (
    CounterRecords,
    KernelCounters,
    LaunchFacts,
    SassCounts,
    counter_notes,
    environment_problem,
    parse_counters,
)
from intelliperf.gpu.nvidia.metrics import LAUNCH_METRICS, SASS_METRICS
from intelliperf.gpu.nvidia.profiles import counted_metrics, profiles_from_counters
from intelliperf.gpu.nvidia.sass_listing import parse_listing
from tests.recorded import RECORDED

HEADER = {"accordo": "counters", "version": 1, "pid": 7}
KERNEL = "_Z5scalePKfPfi"


def text(*records: dict) -> str:
    return "\n".join(json.dumps(r) for r in [HEADER, *records]) + "\n"


def first_run() -> str:
    return text(
        {"device": 0, "sm_count": 132, "l2_bytes": 52428800, "registers_per_sm": 65536,
         "max_blocks_per_sm": 32},
        {"metrics": ["gpu__time_duration.sum", "dram__sectors_read.sum"], "unsupported": ["x.sum"],
         "chip": "GH100"},
        {"sass_metrics": list(SASS_METRICS), "unsupported": []},
        {"cubin": 99, "bytes": 1000},
        {"kernel": KERNEL, "demangled": "scale(float const*, float*, int)", "grid": [8, 1, 1],
         "block": [256, 1, 1], "registers": 16, "static_shared": 0, "dynamic_shared": 0, "local_bytes": 0},
        {"kernel": KERNEL, "launch": 1, "metrics": {"gpu__time_duration.sum": 5000.0,
                                                     "dram__sectors_read.sum": None}, "seconds": 0.05},
        {"kernel": KERNEL, "launch": 2, "cubin": 99, "pc": [0, 16],
         "counts": {"smsp__sass_inst_executed": [8, 8], "smsp__sass_thread_inst_executed": [256, 256]}},
        {"kernel": "_Z4initPf", "demangled": "init(float*)", "grid": [1, 1, 1], "block": [32, 1, 1],
         "registers": 8, "static_shared": 0, "dynamic_shared": 0, "local_bytes": 0},
        {"kernel": "_Z4initPf", "launch": 1, "metrics": {"gpu__time_duration.sum": 900.0}, "seconds": 0.04},
        {"kernel": KERNEL, "launches": 40},
        {"kernel": "_Z4initPf", "launches": 1},
        {"end": True},
    )  # fmt: skip


def test_a_run_is_read_kernel_by_kernel() -> None:
    records = parse_counters([first_run()])
    scale = records.kernels[KERNEL]
    assert records.device["sm_count"] == 132 and records.chip == "GH100"
    assert records.unsupported == ["x.sum"] and records.cubins == {99}
    assert scale.launch == LaunchFacts((8, 1, 1), (256, 1, 1), 16, 0, 0, 0)
    assert scale.metrics == {"gpu__time_duration.sum": 5000.0}  # null: not evaluated, absent (never 0)
    assert (
        scale.sass is not None
        and scale.sass.pcs == (0, 16)
        and scale.sass.at(1)["smsp__sass_inst_executed"] == 8
    )
    assert scale.launches == 40
    assert records.only_launched_once() == ["_Z4initPf"]


def test_the_second_run_adds_the_instructions_of_kernels_launched_once() -> None:
    second = text(
        {"sass_metrics": ["smsp__sass_inst_executed"], "unsupported": []},
        {"kernel": "_Z4initPf", "demangled": "init(float*)", "grid": [1, 1, 1], "block": [32, 1, 1],
         "registers": 8, "static_shared": 0, "dynamic_shared": 0, "local_bytes": 0},
        {"kernel": "_Z4initPf", "launch": 1, "cubin": 99, "pc": [0],
         "counts": {"smsp__sass_inst_executed": [1]}},
        {"kernel": "_Z4initPf", "launches": 1},
        {"end": True},
    )  # fmt: skip
    records = parse_counters([second], parse_counters([first_run()]))
    init = records.kernels["_Z4initPf"]
    assert init.metrics == {"gpu__time_duration.sum": 900.0} and init.sass is not None
    assert records.only_launched_once() == []
    assert records.kernels[KERNEL].sass is not None  # the first run's counts are kept


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"accordo":"trace","version":1,"pid":1}\n', "not a profiler counters file"),
        ('{"accordo":"counters","version":9,"pid":1}\n', "of version 9"),
        (text({"end": True})[:-1], "truncated"),
        (text({"kernel": KERNEL, "launch": 2, "cubin": 1, "pc": [0, 16], "counts": {"m": [1]}}),
         "one count per pc"),
        (text({"kernel": KERNEL, "grid": [1, 1], "block": [1, 1, 1], "registers": 1, "static_shared": 0,
               "dynamic_shared": 0, "local_bytes": 0}), "'grid' is missing or not a list of 3 integers"),
        (text({"something": 1}), "not a counters record"),
        (text({"kernel": KERNEL, "what": 1}), f"not a counters record of kernel {KERNEL}"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_refused_with_where_and_why(bad: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_counters([bad])


def test_problems_name_their_kernel_or_the_run() -> None:
    records = parse_counters(
        [
            text(
                {"error": "cuptiProfilerInitialize failed: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
                 "stage": "metrics"},
                {"error": "no instruction of the launch was patched", "stage": "sass", "kernel": KERNEL},
                {"kernel": KERNEL, "launches": 3},
                {"end": True},
            )
        ]
    )  # fmt: skip
    assert records.kernels[KERNEL].problems == ["sass: no instruction of the launch was patched"]
    problem = environment_problem(records)
    assert problem is not None and "INSUFFICIENT_PRIVILEGES" in problem
    ranked = [ranked_kernel(KERNEL, "scale(float const*, float*, int)"), ranked_kernel("_Z1kv", "k()")]
    notes = counter_notes(records, ranked)
    assert notes == [
        "scale(float const*, float*, int): no kernel-level counters "
        "(sass: no instruction of the launch was patched)",
        "k(): not launched in the counter pass, so not counted",
    ]
    assert environment_problem(parse_counters([first_run()])) is None


def ranked_kernel(name: str, demangled: str, rank: int = 1) -> RankedKernel:
    return RankedKernel(
        rank=rank, name=name, demangled=demangled, launches=2, total_ns=1, mean_ns=1, median_ns=1, share=0.5
    )


# --- the same counts through both front ends ------------------------------------------------------------

SASS_OF_COLUMN = {column: metric for metric, column in SASS_METRICS.items()}
H200 = {
    "sm_count": 132,
    "l2_bytes": 62914560,
    "registers_per_sm": 65536,
    "max_blocks_per_sm": 32,
    "warp_size": 32,
}
"""The device facts the native profiler reads from the driver, as the H200 the pages were recorded on has
them."""


def as_counter_records(case: Path) -> tuple[CounterRecords, list[RankedKernel]]:
    """Counter records holding the counts ncu measured on this binary: its raw page's kernel-level metrics
    and launch statistics, and each instruction's source-page columns at its offset from the function's
    start (the pc CUPTI reports), under the SASS metric that counts that column."""
    records = CounterRecords(device=dict(H200))
    pages = instructions_from_cuda_sass((case / "source_cuda_sass.csv").read_text())
    ranked = []
    for rank, raw in enumerate(parse_raw_csv((case / "raw.csv").read_text()), start=1):
        instructions = pages[raw.name]
        start = min(int(address, 16) for address in instructions)
        by_offset = sorted((int(address, 16) - start, i) for address, i in instructions.items())
        counts = {
            SASS_OF_COLUMN[COLUMNS[label]]: tuple(int(i.metrics.get(label, 0)) for _, i in by_offset)
            for label in COLUMNS
            if COLUMNS[label] in SASS_OF_COLUMN
        }
        m = raw.metrics
        records.kernels[raw.name] = KernelCounters(
            name=raw.name,
            launch=LaunchFacts(
                (int(m["launch__grid_size"]), 1, 1),
                (int(m["launch__block_size"]), 1, 1),
                int(m["launch__registers_per_thread"]),
                0,
                0,
                0,
            ),
            metrics={k: v for k, v in m.items() if k not in LAUNCH_METRICS and not k.startswith("device__")},
            sass=SassCounts(cubin=1, pcs=tuple(o for o, _ in by_offset), counts=counts),
            launches=2,
        )
        ranked.append(ranked_kernel(raw.name, raw.name, rank))
    return records, ranked


def decisions(profiles: dict[str, KernelProfile], skip: str = "") -> list[tuple[object, ...]]:
    found = []
    for name, profile in sorted(profiles.items()):
        for formula in (f for f in formulas_for("auto") if f.name != skip):
            d = formula.evaluate(profile)
            found.append((name, d.formula, d.decided, d.present, tuple(loc.line for loc in d.locations)))
    return found


@pytest.mark.parametrize(
    "case", sorted(p for p in (RECORDED / "sass_listing").iterdir() if p.is_dir()), ids=str
)
def test_counts_give_the_profiles_and_decisions_nsight_computes_pages_give(case: Path) -> None:
    records, ranked = as_counter_records(case)
    listings = {1: parse_listing((case / "listing.txt").read_text())}
    ours = profiles_from_counters(records, listings, ranked, arch="sm_90")
    theirs = build_profiles(
        (case / "raw.csv").read_text(),
        (case / "source_cuda_sass.csv").read_text(),
        None,
        ranked,
        arch="sm_90",
    )
    assert ours.keys() == theirs.keys() and ours
    for name in ours:
        mine, ncu = dict(ours[name].metrics), dict(theirs[name].metrics)
        # the launch's SM count and shared memory come from the counters' launch record, which ncu's pages
        # of these kernels were not asked for
        assert set(mine) - set(ncu) <= {Quantity.SM_COUNT, Quantity.SHARED_BYTES_PER_BLOCK}, name
        assert {k: mine[k] for k in ncu} == pytest.approx(ncu), name
        for column in Column:
            assert ours[name].instruction_total(column) == theirs[name].instruction_total(column), (
                name,
                column,
            )
        # per line: ncu lists an inlined instruction under the inlined line and its call site, and counts it
        # in both rows; here it counts once, at the innermost line of the project. Each row is one of
        # ncu's rows, holding no more than ncu's.
        theirs_lines = {(Path(r.file).name, r.line): r.get(Column.EXECUTED) for r in theirs[name].source}
        for row in ours[name].source:
            assert row.get(Column.EXECUTED) <= theirs_lines[(Path(row.file).name, row.line)], (name, row.line)
    # occupancy reads the launch's SM count and shared memory, which these ncu pages were not asked for
    assert decisions(ours, skip="occupancy") == decisions(theirs, skip="occupancy")


def test_a_kernel_with_counters_but_no_listing_is_diagnosed_without_lines() -> None:
    case = RECORDED / "sass_listing" / "tile_sums-original"
    records, ranked = as_counter_records(case)
    profiles = profiles_from_counters(records, {}, ranked, arch="sm_90")
    profile = next(iter(profiles.values()))
    assert profile.source == [] and profile.instructions and not profile.source_page
    assert all(i.assembly == "" for i in profile.instructions)


def test_the_recorded_launch_statistics_are_nsight_computes() -> None:
    """Every example recorded with both instruments: the launch statistics the counter pass computes from a
    kernel's first launch (grid, block, registers per thread with the driver's minimum, blocks per SM by
    registers) are ncu's for the same kernel of the same source (H200 and H100: the same sm_90 limits)."""
    compared = 0
    for folder in sorted(RECORDED.glob("*/*")):
        counters = sorted(folder.glob("counters-*.jsonl"))
        if not counters or not (folder / "raw.csv").is_file():
            continue
        records = parse_counters([path.read_text() for path in counters])
        raw = {k.name: k.metrics for k in parse_raw_csv((folder / "raw.csv").read_text())}
        for name, counted in records.kernels.items():
            if name not in raw or counted.launch is None:
                continue
            ours = counted_metrics(counted, records.device)
            for metric in LAUNCH_METRICS:
                if metric in raw[name]:  # ncu's pages hold the launch statistics the formulas read then
                    assert ours[metric] == raw[name][metric], (folder, name, metric)
            compared += 1
    assert compared >= 30

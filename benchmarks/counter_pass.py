"""Where the counter pass's time goes (GPU machine), so its cost can be predicted and its target judged.

Per example: the plain run; Nsight Compute's floor (the application under ncu with the counter pass's
section folder and a kernel filter that matches nothing: ncu's start-up and injection, no replay); the
profiling run exactly as the counter pass issues it (`benchmarks.ncu.pages.profile_command`: the
formulas' metrics, our source section, the source page printed into the log); the raw page as the counter pass
reads it (`read_raw_page`: ncu's report reader, only the pass's metrics and the device's facts) and, for
comparison, as the reader reads every metric and as ncu exports it; and the
SASS-page export it no longer needs. Each timing is the median of --repeats. The fit at the end is a
least-squares line through (profiled kernels, profiling run - floor): what each profiled kernel adds (all
its replay passes) and what profiling costs beyond the floor whatever the number of kernels.

``--record DIR`` keeps, per example, the profiling run's log and the raw page both ways (`raw.csv` from
the reader, `raw_export.csv` from ncu) as test fixtures.

``--plans`` times other ways of collecting the same counters, side by side in one run, on the one- and the
eight-kernel example (median of --repeats, each plan's runs interleaved with the others'): the counter
pass as it is (`one_run`); the formulas' kernel-level metrics alone and our source section alone; the
two-stage plan (kernel-level metrics for every top kernel, then the source section only for the kernels
where a formula fires: here the hottest one and the hottest three, since which fire is known only after
the first stage); with the two kernel-level SASS-patched metrics the pass asked for until 2026-11-25
(`with_sass_kernel_metrics`); with the L1 bytes per memory space and the two cache hit rates it asked
for until 2026-11-25 (`with_l1_bytes_and_hit_rates`: 5 replay passes per kernel where the pass now makes
4); without
`--import-source`; with `--cache-control none` (no cache flush between replay passes, which would make the
DRAM and L2 counters depend on the pass before); application replay; the floor; the plain run.

``--against-ncu`` (since 2026-11-27, when the counter pass left Nsight Compute for CUPTI) times, per example
and side by side (interleaved, median of --repeats), the plain run, the counter pass as the engine runs it
(`NvidiaBackend.collect`: the counters mode, the second run for kernels launched once, nvdisasm) and
the Nsight Compute pass it replaced (its command and raw-page reader, as the sections above time them), and
checks that both measured the same: every per-instruction total equal, counts of work within 2%, and how
far the throughputs and durations differ. It writes ``benchmarks/results/counter_pass_vs_ncu.json``.

``--pass-budget`` asks what one replay pass fewer would cost the diagnoses and save: on the one-kernel
example, ncu's passes per kernel for the pass, and which kernel-level metrics must go for one pass fewer
(kept greedily in the table's order, and again with the memory units' sub-units first); on the
eight-kernel example, the pass side by side with the pass without them, and the kernel-level metrics alone
against one of them alone (what a replay pass costs per kernel). Beside it, from the recorded raw pages
(tests/fixtures/gpu), how far each sm_90 sub-unit's absence would under-read its unit's utilization.

    python -m benchmarks.counter_pass --out benchmarks/results/counter_pass.json [--record DIR] [--plans]
    python -m benchmarks.counter_pass --pass-budget   (writes benchmarks/results/counter_pass_budget.json)
    python -m benchmarks.counter_pass --against-ncu [--only example/binary,...]
        (writes benchmarks/results/counter_pass_vs_ncu.json)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.common import device_name, plain_wall
from benchmarks.ncu.pages import (
    EXPORTS,
    LOG_FILE,
    RAW_PAGE,
    SASS_PAGE,
    SECTION_FOLDER,
    SOURCE_PAGE,
    export_page,
    kernel_id_filter,
    parse_raw_csv,
    profile_command,
    read_raw_page,
)
from benchmarks.ncu.profiles import DEVICE_METRICS
from benchmarks.ncu.source import COLUMNS, instructions_from_cuda_sass
from formulas.selection import formulas_for, metrics_for
from intelliperf.contract.profile import Quantity
from intelliperf.engine.diagnose import targets_of
from intelliperf.gpu.backend import rank_kernels
from intelliperf.gpu.nvidia.backend import NvidiaBackend
from intelliperf.gpu.nvidia.cupti_counters import CounterRecords, parse_counters
from intelliperf.gpu.nvidia.metrics import kernel_metrics
from intelliperf.gpu.nvidia.profiles import counted_metrics
from profiler.trace import run_traced

ROOT = Path(__file__).resolve().parents[1]

EXAMPLES = ROOT / "examples"
RECORDED = ROOT / "tests" / "fixtures" / "gpu"
SASS_KERNEL_METRICS = (
    "smsp__sass_inst_executed_op_global_atom.sum",
    "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",
)
"""What the counter pass asked for until the source section's columns replaced them (nvidia_metrics.py)."""
L1_BYTES_AND_HIT_RATES = (
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",
    "lts__t_sector_op_read_hit_rate.pct",
)
"""What it asked for until 2026-11-25: the bytes now come from the source section's columns, and the hit
rates decided nothing (nvidia_metrics.py)."""

CASES = {  # example, binary: one, two and eight profiled kernels
    "divergent_lanes": "bin/divergent_lanes",
    "atomic_reduction": "bin/atomic_reduction_fixed",
    "tile_sums": "bin/tile_sums",
}


def timed(argv: list[str], cwd: Path) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} ... exited {done.returncode}: {done.stderr[-2000:]}")
    return time.perf_counter() - started, done.stdout + done.stderr


def _without_page(command: list[str]) -> list[str]:
    if SOURCE_PAGE[0] not in command:
        return list(command)
    start = command.index(SOURCE_PAGE[0])
    return command[:start] + command[start + len(SOURCE_PAGE) :]


def replay_passes(profile: list[str], cwd: Path) -> list[int]:
    """Replay passes per profiled kernel, as ncu reports them ("- 10 passes") when it prints no page."""
    without_page = _without_page(profile)
    log = Path(without_page[without_page.index("--log-file") + 1])
    timed(without_page, cwd)
    return [int(n) for n in re.findall(r"- (\d+) pass(?:es)?\b", log.read_text())]


def counter_pass_inputs(argv: list[str], cwd: Path) -> tuple[list[str], list[str]]:
    """The kernels the counter pass profiles (one traced run) and the ncu metrics it asks for, on sm_90."""
    names = [k.name for k in targets_of(rank_kernels(run_traced(argv, cwd=cwd, timeout_s=300).stats), 10)]
    return names, kernel_metrics(metrics_for(formulas_for("auto")), "sm_90")


def measure(example: str, binary: str, repeats: int, record: Path | None) -> dict[str, object]:
    cwd = EXAMPLES / example
    argv = [f"./{binary}"]
    names, metrics = counter_pass_inputs(argv, cwd)
    floor_cmd = [
        "ncu",
        "--clock-control",
        "none",
        "--section-folder",
        str(SECTION_FOLDER),
        "--apply-rules",
        "no",
    ]
    floor_cmd += ["--kernel-name-base", "mangled"]
    floor_cmd += ["--kernel-id", "::regex:^no_kernel_is_named_this$:1", "--metrics", "gpu__time_duration.sum"]
    with tempfile.TemporaryDirectory() as tmp:
        report, log = Path(tmp) / "profile.ncu-rep", Path(tmp) / "ncu.log"
        profile = profile_command("ncu", argv, kernel_names=names, metrics=metrics, report=report, log=log)
        floor, runs, reader, every, raw, sass = [], [], [], [], [], []
        for _ in range(repeats):
            floor.append(timed(floor_cmd + argv, cwd)[0])
            runs.append(timed(profile, cwd)[0])
            started = time.perf_counter()
            page = read_raw_page("ncu", report, metrics=[*metrics, *DEVICE_METRICS])
            reader.append(time.perf_counter() - started)
            started = time.perf_counter()
            read_raw_page("ncu", report)
            every.append(time.perf_counter() - started)
            export = ["ncu", "--import", str(report), "--page"]
            raw.append(timed([*export, *EXPORTS[RAW_PAGE]], cwd)[0])
            sass.append(timed([*export, *EXPORTS[SASS_PAGE]], cwd)[0])
        if record is not None:
            (record / example).mkdir(parents=True, exist_ok=True)
            (record / example / RAW_PAGE).write_text(page)
            (record / example / "raw_export.csv").write_text(export_page("ncu", report, *EXPORTS[RAW_PAGE]))
            (record / example / LOG_FILE).write_text(log.read_text())
        passes = replay_passes(profile, cwd)
    plain = plain_wall(argv, cwd, repeats=repeats)
    row = {
        "example": example,
        "binary": binary,
        "profiled_kernels": len(names),
        "passes_per_kernel": max(passes) if passes else None,
        "plain_s": round(plain, 4),
        "ncu_floor_s": round(statistics.median(floor), 4),
        "profile_s": round(statistics.median(runs), 4),
        "raw_reader_s": round(statistics.median(reader), 4),
        "raw_reader_every_metric_s_not_needed": round(statistics.median(every), 4),
        "raw_export_s_not_needed": round(statistics.median(raw), 4),
        "sass_export_s_not_needed": round(statistics.median(sass), 4),
    }
    row["counter_pass_s"] = round(row["profile_s"] + row["raw_reader_s"], 4)
    row["ratio"] = round(row["counter_pass_s"] / plain, 2)
    row["floor_ratio"] = round((row["ncu_floor_s"] + row["raw_reader_s"]) / plain, 2)
    return row


def _without(command: list[str], option: str, values: int = 1) -> list[str]:
    at = command.index(option)
    return command[:at] + command[at + 1 + values :]


def _with_kernels(command: list[str], names: list[str]) -> list[str]:
    at = command.index("--kernel-name-base")
    return command[:at] + kernel_id_filter(names) + command[at + 4 :]


def kernel_level_command(one_run: list[str]) -> list[str]:
    """The pass's command with only its kernel-level metrics: no source section, page or imported source."""
    return _without(_without(_without_page(one_run), "--section"), "--import-source")


def plan_commands(names: list[str], metrics: list[str], tmp: Path) -> dict[str, list[list[str]]]:
    """Each plan's ncu command lines (without the application's argv), run one after another."""
    report, log = tmp / "profile.ncu-rep", tmp / "ncu.log"
    one_run = profile_command("ncu", [], kernel_names=names, metrics=metrics, report=report, log=log)
    kernel_level = kernel_level_command(one_run)
    source_only = _without(one_run, "--metrics")
    with_sass = list(one_run)
    with_sass[one_run.index("--metrics") + 1] = ",".join([*metrics, *SASS_KERNEL_METRICS])
    with_l1_bytes = list(one_run)
    with_l1_bytes[one_run.index("--metrics") + 1] = ",".join([*metrics, *L1_BYTES_AND_HIT_RATES])
    return {
        "one_run": [one_run],
        "with_sass_kernel_metrics": [with_sass],
        "with_l1_bytes_and_hit_rates": [with_l1_bytes],
        "kernel_level_only": [kernel_level],
        "source_section_only": [source_only],
        "two_stage_source_for_1": [kernel_level, _with_kernels(source_only, names[:1])],
        "two_stage_source_for_3": [kernel_level, _with_kernels(source_only, names[:3])],
        "without_import_source": [_without(one_run, "--import-source")],
        "cache_control_none": [[one_run[0], "--cache-control", "none", *one_run[1:]]],
        "application_replay": [[one_run[0], "--replay-mode", "application", *one_run[1:]]],
        "floor": [_with_kernels(kernel_level, ["no_kernel_is_named_this"])],
        "plain": [[]],
    }


def plans(example: str, binary: str, repeats: int) -> dict[str, object]:
    """Seconds per plan (median of ``repeats``, plans interleaved) for the top kernels of one example."""
    cwd = EXAMPLES / example
    argv = [f"./{binary}"]
    names, metrics = counter_pass_inputs(argv, cwd)
    with tempfile.TemporaryDirectory() as tmp:
        commands = plan_commands(names, metrics, Path(tmp))
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeats):
            for name, runs in commands.items():
                seconds[name].append(sum(timed(command + argv, cwd)[0] for command in runs))
    median = {name: round(statistics.median(values), 4) for name, values in seconds.items()}
    return {
        "example": example,
        "profiled_kernels": len(names),
        "median_s": median,
        "ratio_to_plain": {name: round(value / median["plain"], 2) for name, value in median.items()},
        "runs_s": {name: [round(v, 4) for v in values] for name, values in seconds.items()},
    }


def metrics_past_budget(metrics: Sequence[str], fits: Callable[[list[str]], bool]) -> list[str]:
    """The metrics left out when each, in order, is kept if the kept ones with it still ``fits``."""
    kept: list[str] = []
    for metric in metrics:
        if fits([*kept, metric]):
            kept.append(metric)
    return [m for m in metrics if m not in kept]


def subunit_underread(pages: Sequence[Path]) -> dict[str, dict[str, object]]:
    """Per sm_90 sub-unit of the L2 and L1 utilizations: over the recorded kernels that have every sub-unit,
    the most points by which the unit's utilization (the busiest sub-unit) would read lower without it,
    on which kernel, and on how many kernels by more than one point."""
    found: dict[str, dict[str, object]] = {}
    for quantity in (Quantity.L2_BUSY_PCT, Quantity.L1_BUSY_PCT):
        units = kernel_metrics([quantity], "sm_90")
        kernels = [
            (f"{page.parent.relative_to(RECORDED)}: {k.name}", [k.metrics[u] for u in units])
            for page in pages
            for k in parse_raw_csv(page.read_text())
            if all(u in k.metrics for u in units)
        ]
        for at, unit in enumerate(units):
            losses = [(max(v) - max(v[:at] + v[at + 1 :]), where) for where, v in kernels]
            worst, where = max(losses)
            found[unit] = {
                "kernels": len(kernels),
                "most_points": round(worst, 2),
                "on": where,
                "kernels_over_1_point": sum(loss > 1 for loss, _ in losses),
            }
    return found


def pass_budget(repeats: int) -> dict[str, object]:
    """What one replay pass fewer per kernel would take out of the pass and save (see the module doc)."""
    with tempfile.TemporaryDirectory() as tmp:
        report, log = Path(tmp) / "profile.ncu-rep", Path(tmp) / "ncu.log"
        cwd = EXAMPLES / "divergent_lanes"
        argv = [f"./{CASES['divergent_lanes']}"]
        names, metrics = counter_pass_inputs(argv, cwd)

        def passes(chosen: list[str]) -> int:
            command = profile_command("ncu", [], kernel_names=names, metrics=chosen, report=report, log=log)
            return max(replay_passes(command + argv, cwd))

        full = passes(metrics)
        subunits = kernel_metrics(
            [Quantity.DRAM_BUSY_PCT, Quantity.L2_BUSY_PCT, Quantity.L1_BUSY_PCT], "sm_90"
        )
        in_order = metrics_past_budget(metrics, lambda chosen: passes(chosen) < full)
        subunits_first = [*subunits, *(m for m in metrics if m not in subunits)]
        with_subunits = metrics_past_budget(subunits_first, lambda chosen: passes(chosen) < full)

        cwd = EXAMPLES / "tile_sums"
        argv = [f"./{CASES['tile_sums']}"]
        names, metrics = counter_pass_inputs(argv, cwd)
        one_run = profile_command("ncu", [], kernel_names=names, metrics=metrics, report=report, log=log)
        fewer = [m for m in metrics if m not in in_order]
        one_pass_fewer = profile_command("ncu", [], kernel_names=names, metrics=fewer, report=report, log=log)
        kernel_level = kernel_level_command(one_run)
        single = list(kernel_level)
        single[single.index("--metrics") + 1] = metrics[0]
        commands = {
            "one_run": one_run,
            "one_pass_fewer": one_pass_fewer,
            "kernel_level_only": kernel_level,
            "one_kernel_level_metric": single,
        }
        seconds: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(repeats):
            for name, command in commands.items():
                seconds[name].append(timed(command + argv, cwd)[0])
        passes_8 = {name: max(replay_passes(command + argv, cwd)) for name, command in commands.items()}
    median = {name: round(statistics.median(v), 4) for name, v in seconds.items()}
    per_pass = (median["kernel_level_only"] - median["one_kernel_level_metric"]) / (
        (passes_8["kernel_level_only"] - passes_8["one_kernel_level_metric"]) * len(names)
    )
    return {
        "passes_per_kernel": full,
        "out_for_one_pass_fewer": {"in_the_tables_order": in_order, "memory_sub_units_first": with_subunits},
        "tile_sums": {
            "profiled_kernels": len(names),
            "passes_per_kernel": passes_8,
            "median_s": median,
            "runs_s": {name: [round(v, 4) for v in values] for name, values in seconds.items()},
            "plain_s": round(plain_wall(argv, cwd, repeats=repeats), 4),
            "seconds_per_replay_pass_per_kernel": round(per_pass, 4),
        },
    }


def per_kernel_cost(rows: list[dict]) -> dict[str, float] | None:
    """Least squares of (profiled kernels, profiling run - floor): seconds per profiled kernel and the fixed
    seconds beyond the floor; None with fewer than two distinct kernel counts."""
    points = [(r["profiled_kernels"], r["profile_s"] - r["ncu_floor_s"]) for r in rows]
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
    return {"seconds_per_kernel": round(slope, 4), "fixed_seconds": round(mean_y - slope * mean_x, 4)}


WORK_COUNTS = (
    "lts__t_sectors_op_atom.max",
    "lts__t_sectors_op_red.max",
    "lts__t_sectors_op_atom.avg",
    "lts__t_sectors_op_red.avg",
    "smsp__inst_executed_op_generic_atom.sum",
    "smsp__inst_executed_op_global_red.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "launch__occupancy_limit_registers",
)
"""Kernel-level values that count work: the same on every replay of a launch, whichever tool reads them."""


def agreement(records: CounterRecords, profiles: dict, raw: dict, pages: dict) -> dict[str, object]:
    """How what the CUPTI pass measured compares with ncu's pages of the same binary: per-instruction
    totals (equal or not), counts of work and the other kernel-level values (relative differences)."""
    columns_equal = all(
        profiles[name].instruction_total(column)
        == sum(i.metrics.get(label, 0.0) for i in pages[name].values())
        for name in profiles
        for label, column in COLUMNS.items()
    )
    counts_off, rates_off = [], []
    for name in profiles:
        ours = counted_metrics(records.kernels[name], records.device)
        for metric, value in ours.items():
            theirs = raw[name].get(metric)
            if theirs is None:
                continue
            off = abs(value - theirs) / abs(theirs) if theirs else abs(value)
            (counts_off if metric in WORK_COUNTS else rates_off).append(off)
    return {
        "instruction_columns_equal": columns_equal,
        "work_counts_max_rel_diff": round(max(counts_off, default=0.0), 4),
        "rates_median_rel_diff": round(statistics.median(rates_off), 4) if rates_off else None,
        "rates_max_rel_diff": round(max(rates_off, default=0.0), 4),
    }


def against_ncu(example: str, binary: str, repeats: int) -> dict[str, object]:
    """The CUPTI counter pass and the Nsight Compute pass it replaced, side by side on one application."""
    cwd = EXAMPLES / example
    argv = [f"./{binary}"]
    kernels = targets_of(rank_kernels(run_traced(argv, cwd=cwd, timeout_s=300).stats), 10)
    wanted = metrics_for(formulas_for("auto"))
    metrics = kernel_metrics(wanted, "sm_90")
    plain, cupti, ncu = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        report, log = Path(tmp) / "profile.ncu-rep", Path(tmp) / "ncu.log"
        command = profile_command(
            "ncu", argv, kernel_names=[k.name for k in kernels], metrics=metrics, report=report, log=log
        )
        recording = Path(tmp) / "recording"
        backend = NvidiaBackend(record=recording)
        for _ in range(repeats):
            plain.append(plain_wall(argv, cwd, repeats=1))
            started = time.perf_counter()
            profiles = backend.collect(argv, cwd=cwd, kernels=kernels, metrics=wanted, timeout_s=600)
            cupti.append(time.perf_counter() - started)
            started = time.perf_counter()
            timed(command, cwd)
            page = read_raw_page("ncu", report, metrics=[*metrics, *DEVICE_METRICS])
            ncu.append(time.perf_counter() - started)
        records = parse_counters([p.read_text() for p in sorted(recording.glob("counters-*.jsonl"))])
        raw = {k.name: k.metrics for k in parse_raw_csv(page)}
        pages = instructions_from_cuda_sass(log.read_text())
    median_plain = statistics.median(plain)
    return {
        "example": example,
        "binary": binary,
        "profiled_kernels": len(kernels),
        "launched_once": sum(1 for k in kernels if k.launches == 1),
        "plain_s": round(median_plain, 4),
        "cupti_s": round(statistics.median(cupti), 4),
        "ncu_s": round(statistics.median(ncu), 4),
        "cupti_ratio": round(statistics.median(cupti) / median_plain, 2),
        "ncu_ratio": round(statistics.median(ncu) / median_plain, 2),
        "runs_s": {
            name: [round(v, 4) for v in values]
            for name, values in (("plain", plain), ("cupti", cupti), ("ncu", ncu))
        },
        "replay_passes": records.passes,
        **agreement(records, profiles, raw, pages),
    }


def print_against(rows: list[dict]) -> None:
    header = f"{'example':18} {'binary':26} {'kernels':>7} {'plain':>6} {'CUPTI':>6} {'x':>5}"
    print(header + f" {'ncu':>6} {'x':>5}  same")
    for r in rows:
        print(
            f"{r['example']:18} {r['binary']:26} {r['profiled_kernels']:7} {r['plain_s']:6.2f} "
            f"{r['cupti_s']:6.2f} {r['cupti_ratio']:5.1f} {r['ncu_s']:6.2f} {r['ncu_ratio']:5.1f}  "
            f"{r['instruction_columns_equal']}"
        )


def default_out(pass_budget: bool, against: bool = False) -> Path:
    """Each mode's own results file, so that one never overwrites the other's."""
    name = "counter_pass_budget.json" if pass_budget else "counter_pass.json"
    if against:
        name = "counter_pass_vs_ncu.json"
    return ROOT / "benchmarks" / "results" / name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/<mode's file>")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--record", type=Path, default=None, help="keep the pages here (test fixtures)")
    parser.add_argument("--plans", action="store_true", help="also time other collection plans")
    parser.add_argument("--pass-budget", action="store_true", help="only what a pass fewer would take")
    parser.add_argument("--against-ncu", action="store_true", help="only the CUPTI pass beside ncu's")
    parser.add_argument("--only", default=None, help="--against-ncu: comma-separated example/binary pairs")
    args = parser.parse_args()
    out = args.out or default_out(args.pass_budget, args.against_ncu)
    subprocess.run(["make", "-C", str(EXAMPLES), "-j8", "-s"], check=True)
    if args.against_ncu:
        cases = [pair.split("/", 1) for pair in args.only.split(",")] if args.only else list(CASES.items())
        rows = []
        for example, binary in cases:
            rows.append(against_ncu(example, binary, args.repeats))
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "runs_s"}), flush=True)
        result = {"device": device_name(), "rows": rows}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1) + "\n")
        print_against(rows)
        print(f"device {result['device']}")
        return 0
    if args.pass_budget:
        budget = {
            "device": device_name(),
            **pass_budget(args.repeats),
            "sub_unit_underread_on_recorded_kernels": subunit_underread(sorted(RECORDED.glob("**/raw.csv"))),
        }
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(budget, indent=1) + "\n")
        print(json.dumps(budget, indent=1))
        return 0
    rows = [measure(example, binary, args.repeats, args.record) for example, binary in CASES.items()]
    result: dict[str, object] = {"device": device_name(), "rows": rows, "fit": per_kernel_cost(rows)}
    if args.plans:
        result["plans"] = [
            plans(example, binary, args.repeats)
            for example, binary in CASES.items()
            if example in ("divergent_lanes", "tile_sums")
        ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    header = f"{'example':18} {'kernels':>7} {'passes':>6} {'plain':>6} {'floor':>6} "
    header += f"{'profile':>7} {'raw':>5} "
    print(header + f"{'(export)':>8} {'(sass)':>6} {'ratio':>6} {'floor x':>7}")
    for r in rows:
        print(
            f"{r['example']:18} {r['profiled_kernels']:7} {r['passes_per_kernel'] or '?':>6} "
            f"{r['plain_s']:6.2f} {r['ncu_floor_s']:6.2f} {r['profile_s']:7.2f} {r['raw_reader_s']:5.2f} "
            f"{r['raw_export_s_not_needed']:8.2f} {r['sass_export_s_not_needed']:6.2f} {r['ratio']:6.1f} "
            f"{r['floor_ratio']:7.1f}"
        )
    print(f"device {result['device']}: beyond the floor, {result['fit']}")
    for plan in result.get("plans", []):  # type: ignore[union-attr]
        print(f"plans, {plan['example']} ({plan['profiled_kernels']} kernels): seconds and ratio to plain")
        for name, value in plan["median_s"].items():
            print(f"  {name:26} {value:7.2f} {plan['ratio_to_plain'][name]:6.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

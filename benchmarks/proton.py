"""Proton's intra-kernel profile (GPU machine): what it costs the kernel and how far its cycles are from a
hardware count of the same thing.

For every Triton example, original and fixed, the example runs under Nsight Compute
(``--clock-control none``), its kernel's launches filtered by name:

- overhead: the kernel's duration (``gpu__time_duration.sum``) plain and through IntelliPerf's Proton
  runner (scopes in that kernel), median instrumented / median plain - 1 (the kernel's own time);
- error and share error, on one launch measured both ways at once: ncu runs the instrumented kernel with
  the warp-state sampler and ``smsp__warps_active.sum`` while Proton records it. The sampler's samples
  are given to Proton's regions by program counter (between a region's clock reads; see
  benchmarks/proton_shares.py), so both sides count the same span of the same binary. error = |Proton's
  cycles between each warp's first and last record, summed over warps - the resident warp-cycles x the
  share of samples between those records| / the latter; share error = the largest |Proton's share of a
  region - the sampler's share of that region's span| over the example's regions;
- plain_share_error: Proton's shares against the sampler on the uninstrumented kernel, by source line
  (what a user would compare with ncu's source view): it adds the instrumentation's shift of the division
  and the different attribution of a load's latency (Proton: the load's scope; the sampler: the
  instruction that waits for the value);
- residency_gap: |Proton's cycles - smsp__warps_active.sum| / smsp__warps_active.sum on that launch, the
  share of the warps' lives outside their first and last record (launch, exit, stores draining, Proton's
  own buffer write-back), which no record can see.

    python -m benchmarks.proton [--out benchmarks/results/proton.json] [--iterations 3]
        [--only triton_atomic,triton_strided] [--rows-from earlier.json ...] [--record DIR]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from benchmarks.common import device_name, earlier_outputs, joined_rows
from benchmarks.ncu.pages import export_page, parse_raw_csv
from benchmarks.proton_shares import (
    function_span,
    region_spans,
    same_launch_accuracy,
    sampled_lines,
    share_errors,
)
from intelliperf.gpu.proton import HATCHET, META, RUNNER, read_profile, scope_metrics

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
METRICS = ("gpu__time_duration.sum", "smsp__warps_active.sum")
SAME_LAUNCH_PAGE, SAME_LAUNCH_RAW = "same_launch_source.csv", "same_launch_raw.csv"
"""What ``--record`` keeps of the same launch measured both ways, beside Proton's HATCHET and META."""
METHOD = (
    "Nsight Compute (--clock-control none) times each launch of the example's kernel twice, plain and "
    "under IntelliPerf's Proton runner; overhead = median instrumented / median plain duration - 1. "
    "error and share_error come from one launch measured both ways at once: ncu runs the instrumented "
    "kernel with its warp-state sampler (SourceCounters, --warp-sampling-interval 0) and "
    "smsp__warps_active.sum while Proton records it; each sample is given to the Proton region whose clock "
    "reads (CS2R SR_CLOCKLO, the k-th in address order being the runner's k-th record) enclose its program "
    "counter. error = |Proton's cycles between each warp's first and last record, summed over warps - "
    "smsp__warps_active.sum x the share of samples between those records| / the latter; share_error = the "
    "largest |Proton's share of a region - the sampled share of its span| over the example's regions. "
    "plain_share_error compares Proton's shares with the sampler on the uninstrumented kernel by source "
    "line instead (adds the instrumentation's shift and the attribution of a load's latency to its "
    "consumer); residency_gap = |Proton's cycles - smsp__warps_active.sum| / smsp__warps_active.sum on "
    "the same launch (the warps' lives outside their first and last record). benchmarks/proton_shares.py "
    "says what each side counts."
)


def run_ncu(command: list[str], cwd: Path) -> str:
    """ncu's stdout; RuntimeError with the end of its output when it fails."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"ncu failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return done.stdout


def ncu_launches(argv: list[str], kernel: str, cwd: Path) -> list[dict[str, float]]:
    """Per launch of ``kernel``: {metric: value}."""
    command = [
        "ncu", "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS),
        "-k", f"regex:^{kernel}$", *argv,
    ]  # fmt: skip
    rows = [line for line in run_ncu(command, cwd).splitlines() if line.startswith('"')]
    launches: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        value = row["Metric Value"].replace(",", "")
        launches.setdefault(row["ID"], {})[row["Metric Name"]] = float(value)
    return [launches[key] for key in sorted(launches, key=int)]


def sampler_command(
    argv: list[str], kernel: str, log: Path, *, metrics: bool = False, report: Path | None = None
) -> list[str]:
    """ncu on the first launch of ``kernel`` with the warp-state sampler, its source page printed into
    ``log``; with ``metrics`` also METRICS, with ``report`` the report kept there."""
    command = [
        "ncu",
        "--clock-control",
        "none",
        "-k",
        f"regex:^{kernel}$",
        "-c",
        "1",
        "--section",
        "SourceCounters",
    ]
    if metrics:
        command += ["--metrics", ",".join(METRICS)]
    command += [
        "--warp-sampling-interval", "0", "--import-source", "yes",
        "--page", "source", "--print-source", "cuda,sass", "--csv", "--log-file", str(log),
    ]  # fmt: skip
    if report is not None:
        command += ["--export", str(report), "--force-overwrite"]
    return command + argv


def ncu_samples(argv: list[str], kernel: str, cwd: Path, scratch: Path) -> str:
    """The source page of the first launch of ``kernel`` with warp-state samples (uninstrumented)."""
    log = scratch / f"{kernel}-samples.log"
    run_ncu(sampler_command(argv, kernel, log), cwd)
    return log.read_text()


def same_launch(program: list[str], kernel: str, cwd: Path, out: Path) -> tuple[str, str]:
    """One launch of ``kernel`` run by Proton's runner (its profile in ``out``) under ncu with the
    warp-state sampler: ncu's source page with the samples, and its raw page with the launch's resident
    warp-cycles (``smsp__warps_active.sum``)."""
    log, report = out.with_suffix(".samples.log"), out.with_suffix(".ncu-rep")
    runner = ["python3", str(RUNNER), str(out), kernel, "--", *program]
    run_ncu(sampler_command(runner, kernel, log, metrics=True, report=report), cwd)
    raw = export_page(
        "ncu", report, "raw", "--print-units", "base", "--metrics", ",".join(METRICS), timeout_s=600
    )
    return log.read_text(), raw


def resident_warp_cycles(raw: str) -> float:
    """The one profiled launch's ``smsp__warps_active.sum`` from ncu's raw page."""
    (launch,) = parse_raw_csv(raw)
    return launch.metrics["smsp__warps_active.sum"]


def measure(example: dict, variant: str, iterations: int, scratch: Path, record: Path | None) -> dict:
    folder = EXAMPLES / example["name"]
    app = example["app"] if variant == "original" else example["fixed_app"]
    kernel = example["kernel"]
    program = [f"./{app}", str(iterations)]
    plain = ncu_launches(["python3", *program], kernel, folder)
    out = scratch / f"{example['name']}-{variant}"
    instrumented = ncu_launches(["python3", str(RUNNER), str(out), kernel, "--", *program], kernel, folder)
    profile = read_profile(out.with_suffix(".hatchet"), out.with_suffix(".json"), folder)
    cycles = scope_metrics(json.loads(out.with_suffix(".hatchet").read_text())[0], kernel)
    whole = float(cycles["kernel"]["cycles"])  # summed over warps and launches
    plain_ns = statistics.median(x["gpu__time_duration.sum"] for x in plain)
    instrumented_ns = statistics.median(x["gpu__time_duration.sum"] for x in instrumented)
    meta = json.loads(out.with_suffix(".json").read_text())
    proton_shares = {name: float(m["cycles"]) / whole for name, m in cycles.items()}
    source = (folder / app).read_text()
    def_line = next(int(r["line"]) for r in meta["regions"] if r["kind"] == "kernel")
    page = ncu_samples(["python3", *program], kernel, folder, scratch)
    plain_shares = share_errors(
        proton_shares,
        sampled_lines(page, kernel),
        region_spans(source, meta["regions"]),
        app,
        function_span(source, def_line),
    )
    one = scratch / f"{example['name']}-{variant}-one"
    one_page, one_raw = same_launch([f"./{app}", "1"], kernel, folder, one)
    one_hatchet = one.with_suffix(".hatchet").read_text()
    accuracy = same_launch_accuracy(
        scope_metrics(json.loads(one_hatchet)[0], kernel),
        one_page,
        source,
        kernel,
        resident_warp_cycles(one_raw),
    )
    if record is not None:
        kept = record / example["name"] / variant
        kept.mkdir(parents=True, exist_ok=True)
        (kept / SAME_LAUNCH_PAGE).write_text(one_page)
        (kept / SAME_LAUNCH_RAW).write_text(one_raw)
        (kept / HATCHET).write_text(one_hatchet)
        (kept / META).write_text(one.with_suffix(".json").read_text())
    return {
        "example": example["name"],
        "variant": variant,
        "kernel": kernel,
        "launches": len(instrumented),
        "plain_ns": plain_ns,
        "instrumented_ns": instrumented_ns,
        "overhead": round(instrumented_ns / plain_ns - 1, 4),
        **accuracy,
        "plain_share_error": max((r["error"] for r in plain_shares.values()), default=None),
        "plain_shares": plain_shares,
        "regions": [r.model_dump(exclude={"text"}) for r in profile.regions],
    }


def summarize(rows: list[dict], device: str) -> dict[str, object]:
    """The result file: every row, and per measure its median and worst over the rows that have it."""

    def summary(key: str) -> tuple[float | None, float | None]:
        values = [r[key] for r in rows if r[key] is not None]
        return (round(statistics.median(values), 4), round(max(values), 4)) if values else (None, None)

    result: dict[str, object] = {"device": device, "method": METHOD, "examples": rows}
    result["overhead"], result["overhead_max"] = summary("overhead")
    for key in ("error", "share_error", "plain_share_error", "residency_gap"):
        result[key], result[f"{key}_max"] = summary(key)
    result["unmapped"] = [f"{r['example']}/{r['variant']}" for r in rows if r["error"] is None]
    result["targets"] = {"overhead": 0.082, "error": 0.02, "share_error": 0.02}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "proton.json")
    parser.add_argument("--iterations", type=int, default=3, help="kernel launches per run")
    parser.add_argument(
        "--only",
        help="comma-separated example names (default: every Triton example; '' with --rows-from: none, "
        "to join earlier outputs)",
    )
    parser.add_argument(
        "--rows-from",
        type=Path,
        nargs="*",
        default=[],
        help="earlier outputs on the same device whose rows to include; an example measured again here "
        "replaces its earlier rows",
    )
    parser.add_argument(
        "--record", type=Path, default=None, help="keep each same-launch measurement here (test fixtures)"
    )
    args = parser.parse_args()
    only = set(args.only.split(",")) if args.only is not None else None
    examples = json.loads((EXAMPLES / "examples.json").read_text())
    manifest = [e for e in examples if e.get("language") == "triton" and (only is None or e["name"] in only)]
    measured_here = device_name() if manifest else None  # None: the run only joins earlier outputs
    try:
        earlier = earlier_outputs(args.rows_from, measured_here)  # before the run: no GPU time lost
    except ValueError as error:
        parser.error(str(error))
    device = measured_here or (earlier[0]["device"] if earlier else None)
    if device is None:
        parser.error("no example to measure and no --rows-from: there would be no rows")
    rows = []
    with tempfile.TemporaryDirectory(prefix="intelliperf-proton-bench-") as tmp:
        for example in manifest:
            for variant in ("original", "fixed"):
                row = measure(example, variant, args.iterations, Path(tmp), args.record)
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "regions"}), flush=True)
    rows = joined_rows(earlier, rows, key="example", order=[e["name"] for e in examples])
    result = summarize(rows, device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")

    def pct(value: float | None, signed: bool = False) -> str:
        return "n/a" if value is None else format(value, "+.1%" if signed else ".1%")

    print(
        f"{'example':16} {'variant':8} {'plain us':>9} {'instr. us':>9} {'overhead':>9} {'error':>7} "
        f"{'share err':>9} {'plain share err':>15} {'res. gap':>8}"
    )
    for r in rows:
        print(
            f"{r['example']:16} {r['variant']:8} {r['plain_ns'] / 1e3:9.1f} "
            f"{r['instrumented_ns'] / 1e3:9.1f} {pct(r['overhead'], True):>9} {pct(r['error']):>7} "
            f"{pct(r['share_error']):>9} {pct(r['plain_share_error']):>15} {pct(r['residency_gap']):>8}"
        )
    print(
        f"{device}: overhead median {pct(result['overhead'], True)}, error median {pct(result['error'])} "
        f"(max {pct(result['error_max'])}), share error median {pct(result['share_error'])} "
        f"(max {pct(result['share_error_max'])}), unmapped: {result['unmapped'] or 'none'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

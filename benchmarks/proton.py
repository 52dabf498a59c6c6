"""Proton's intra-kernel profile (GPU machine): what it costs the kernel and how far its cycles are from a
hardware count of the same thing.

For every Triton example, original and fixed, the example runs twice under Nsight Compute
(``--clock-control none``), its kernel's launches filtered by name: once plain, once through IntelliPerf's
Proton runner (scopes in that kernel). Nsight Compute reads, per launch, the kernel's duration
(``gpu__time_duration.sum``) and the warp-cycles the SMs held its warps resident
(``smsp__warps_active.sum``: each cycle, every sub-partition adds the warps it holds, so the sum over a
launch is the sum over warps of their lifetimes in cycles).

- overhead: median instrumented duration / median plain duration - 1 (the kernel's own time);
- error: |Proton's whole-kernel cycles summed over warps and launches - smsp__warps_active.sum| /
  smsp__warps_active.sum, in the instrumented run itself. Both count SM cycles per warp; what Proton
  cannot see is the part of a warp's life before its first record and after its last (launch, exit, and
  waiting for its last stores to leave), which the hardware counts.

    python benchmarks/proton.py [--out benchmarks/results/proton.json] [--iterations 3]
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proton_shares import function_span, region_spans, sampled_lines, share_errors  # noqa: E402
from intelliperf.gpu.proton import RUNNER, read_profile, scope_metrics  # noqa: E402

EXAMPLES = ROOT / "examples"
METRICS = ("gpu__time_duration.sum", "smsp__warps_active.sum")
METHOD = (
    "Nsight Compute (--clock-control none) times each launch of the example's kernel twice, plain and "
    "under IntelliPerf's Proton runner; overhead = median instrumented / median plain duration - 1. "
    "error = |Proton's whole-kernel cycles (sum over warps and launches) - smsp__warps_active.sum| / "
    "smsp__warps_active.sum over the same launches of the instrumented run: the hardware's count of the "
    "cycles each warp was resident, against the cycles each warp read between its first and last record. "
    "It counts what Proton cannot see (each warp's life before its first record and after its last: launch, "
    "Proton's own buffer write-back, stores draining), so it is large for kernels of short-lived warps. "
    "share_error = the largest |Proton's share of a region - the hardware warp-state sampler's share of "
    "that region's lines| over the example's regions, the sampler (Nsight Compute's SourceCounters, "
    "--warp-sampling-interval 0) run on the first launch of the uninstrumented kernel; see "
    "benchmarks/proton_shares.py for what each side counts."
)


def ncu_launches(argv: list[str], kernel: str, cwd: Path) -> list[dict[str, float]]:
    """Per launch of ``kernel``: {metric: value}."""
    command = [
        "ncu", "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS),
        "-k", f"regex:^{kernel}$", *argv,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"ncu failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    rows = [line for line in done.stdout.splitlines() if line.startswith('"')]
    launches: dict[str, dict[str, float]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(rows))):
        value = row["Metric Value"].replace(",", "")
        launches.setdefault(row["ID"], {})[row["Metric Name"]] = float(value)
    return [launches[key] for key in sorted(launches, key=int)]


def ncu_samples(argv: list[str], kernel: str, cwd: Path, scratch: Path) -> str:
    """The source page of the first launch of ``kernel`` with warp-state samples (uninstrumented)."""
    log = scratch / f"{kernel}-samples.log"
    command = [
        "ncu", "--clock-control", "none", "-k", f"regex:^{kernel}$", "-c", "1",
        "--section", "SourceCounters", "--warp-sampling-interval", "0", "--import-source", "yes",
        "--page", "source", "--print-source", "cuda,sass", "--csv", "--log-file", str(log), *argv,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"ncu failed ({done.returncode}): {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return log.read_text()


def measure(example: dict, variant: str, iterations: int, scratch: Path) -> dict:
    folder = EXAMPLES / example["name"]
    app = example["app"] if variant == "original" else example["fixed_app"]
    kernel = example["kernel"]
    program = [f"./{app}", str(iterations)]
    plain = ncu_launches(["python3", *program], kernel, folder)
    out = scratch / f"{example['name']}-{variant}"
    instrumented = ncu_launches(["python3", str(RUNNER), str(out), kernel, "--", *program], kernel, folder)
    profile = read_profile(out.with_suffix(".hatchet"), out.with_suffix(".json"), folder)
    hatchet = json.loads(out.with_suffix(".hatchet").read_text())
    cycles = scope_metrics(hatchet[0], kernel)
    whole = float(cycles["kernel"]["cycles"])  # summed over warps and launches
    plain_ns = statistics.median(x["gpu__time_duration.sum"] for x in plain)
    instrumented_ns = statistics.median(x["gpu__time_duration.sum"] for x in instrumented)
    resident = sum(x["smsp__warps_active.sum"] for x in instrumented)
    meta = json.loads(out.with_suffix(".json").read_text())
    proton_shares = {name: float(m["cycles"]) / whole for name, m in cycles.items()}
    source = (folder / app).read_text()
    def_line = next(int(r["line"]) for r in meta["regions"] if r["kind"] == "kernel")
    page = ncu_samples(["python3", *program], kernel, folder, scratch)
    shares = share_errors(
        proton_shares,
        sampled_lines(page, kernel),
        region_spans(source, meta["regions"]),
        app,
        function_span(source, def_line),
    )
    return {
        "example": example["name"],
        "variant": variant,
        "kernel": kernel,
        "launches": len(instrumented),
        "plain_ns": plain_ns,
        "instrumented_ns": instrumented_ns,
        "overhead": round(instrumented_ns / plain_ns - 1, 4),
        "proton_warp_cycles": whole,
        "resident_warp_cycles": resident,
        "error": round(abs(whole - resident) / resident, 4),
        "share_error": max((r["error"] for r in shares.values()), default=None),
        "shares": shares,
        "regions": [r.model_dump(exclude={"text"}) for r in profile.regions],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "proton.json")
    parser.add_argument("--iterations", type=int, default=3, help="kernel launches per run")
    args = parser.parse_args()
    manifest = [
        e for e in json.loads((EXAMPLES / "examples.json").read_text()) if e.get("language") == "triton"
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="intelliperf-proton-bench-") as tmp:
        for example in manifest:
            for variant in ("original", "fixed"):
                row = measure(example, variant, args.iterations, Path(tmp))
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "regions"}), flush=True)
    device = subprocess.run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.strip()
    share_errors_of = [r["share_error"] for r in rows if r["share_error"] is not None]
    result = {
        "device": device,
        "method": METHOD,
        "examples": rows,
        "overhead": round(statistics.median(r["overhead"] for r in rows), 4),
        "error": round(statistics.median(r["error"] for r in rows), 4),
        "error_max": round(max(r["error"] for r in rows), 4),
        "share_error": round(statistics.median(share_errors_of), 4),
        "share_error_max": round(max(share_errors_of), 4),
        "targets": {"overhead": 0.082, "error": 0.02},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"{'example':16} {'variant':8} {'plain us':>9} {'instr. us':>9} {'overhead':>9} {'error':>7} "
        f"{'share err':>9}"
    )
    for r in rows:
        print(
            f"{r['example']:16} {r['variant']:8} {r['plain_ns'] / 1e3:9.1f} "
            f"{r['instrumented_ns'] / 1e3:9.1f} {r['overhead']:+9.1%} {r['error']:7.1%} "
            f"{r['share_error'] if r['share_error'] is None else format(r['share_error'], '9.1%')}"
        )
    print(
        f"{device}: overhead median {result['overhead']:+.1%}, error median {result['error']:.1%}, "
        f"share error median {result['share_error']:.1%}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

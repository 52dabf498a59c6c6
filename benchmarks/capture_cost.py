"""What buffer capture costs (GPU machine): for every bundled example (examples/examples.json), the wall time
of the application in the profiler's capture mode over its plain wall time, and the bytes the capture file
takes.

* plain_s: median wall time of ``<app> 5`` over --repeats runs.
* capture_s: median of ``CaptureRun.wall_s`` (the application's run; reading the file afterwards is not
  counted) over --repeats runs of accordo.capture.run_capture with the example's kernel.
* file_bytes: size of the capture file(s); snapshot_bytes: the bytes of all snapshots the file describes
  (BUFFER records plus those SAME records repeat), i.e. what a capture without deduplication writes.
* full_s / full_ratio / full_file_bytes (unless --no-full): the same with the setting dedup=0 (every snapshot
  written as a BUFFER record), to tell the deduplication's share from the rest.
* stats / full_stats: the profiler's own account of the last captured run (stats=1): time spent
  waiting for device copies, comparing, writing.

    python -m benchmarks.capture_cost [--out benchmarks/results/capture_cost.json] [--repeats 3] [--no-full]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from accordo.capture import run_capture
from accordo.signature import kernel_pattern
from benchmarks.common import device_name, plain_wall
from profiler.trace import MESSAGE_PREFIX

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ITERATIONS = "5"
TARGET_RATIO = 1.5
STATS = f"{MESSAGE_PREFIX}capture stats: "


def capture_wall(argv: list[str], cwd: Path, kernel: str, repeats: int, settings: dict[str, str]) -> dict:
    """Median wall time of ``repeats`` captured runs, and the bytes of the last one."""
    times, file_bytes, snapshot_bytes, launches, stats = [], 0, 0, 0, None
    settings = {**settings, "stats": "1"}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="capture-cost-") as tmp:
            run = run_capture(
                argv,
                kernel_regex=kernel_pattern(kernel),
                cwd=cwd,
                settings=settings,
                timeout_s=600,
                output_dir=tmp,
            )
            if run.status != "ok" or run.capture is None or not run.capture.complete:
                raise RuntimeError(f"{argv} under capture: {run.message}\n{run.stderr_tail}")
            times.append(run.wall_s)
            file_bytes = sum(p.stat().st_size for p in Path(tmp).glob("capture-*.bin"))
            snapshot_bytes = sum(b.nbytes for c in run.captures for x in c.launches for b in x.buffers)
            launches = sum(len(c.launches) for c in run.captures)
            lines = [line for line in run.stderr.splitlines() if line.startswith(STATS)]
            stats = lines[-1].removeprefix(STATS) if lines else None
    return {
        "wall_s": statistics.median(times),
        "file_bytes": file_bytes,
        "snapshot_bytes": snapshot_bytes,
        "launches": launches,
        "stats": stats,
    }


def example_row(example: dict, repeats: int, full: bool) -> dict:
    folder = EXAMPLES / example["name"]
    if not (folder / example["app"]).is_file():
        subprocess.run(["make", "-j8"], cwd=folder, check=True, capture_output=True)
    argv = [example["app"], ITERATIONS]
    plain = plain_wall(argv, folder, repeats)
    captured = capture_wall(argv, folder, example["kernel"], repeats, {})
    row = {
        "example": example["name"],
        "kernel": example["kernel"],
        "launches": captured["launches"],
        "plain_s": round(plain, 3),
        "capture_s": round(captured["wall_s"], 3),
        "ratio": round(captured["wall_s"] / plain, 3),
        "file_bytes": captured["file_bytes"],
        "snapshot_bytes": captured["snapshot_bytes"],
        "stats": captured["stats"],
    }
    if full:
        undeduped = capture_wall(argv, folder, example["kernel"], repeats, {"dedup": "0"})
        row["full_s"] = round(undeduped["wall_s"], 3)
        row["full_ratio"] = round(undeduped["wall_s"] / plain, 3)
        row["full_file_bytes"] = undeduped["file_bytes"]
        row["full_stats"] = undeduped["stats"]
    row["met"] = row["ratio"] <= TARGET_RATIO
    return row


def _mb(n: int) -> str:
    return f"{n / 1e6:.0f}"


def print_table(rows: list[dict]) -> None:
    full = "full_ratio" in rows[0]
    head = f"{'example':<18}{'plain s':>9}{'capture s':>11}{'ratio':>7}{'file MB':>9}{'snapshots MB':>14}"
    if full:
        head += f"{'DEDUP=0 ratio':>15}{'DEDUP=0 MB':>12}"
    print(head)
    for r in rows:
        line = (
            f"{r['example']:<18}{r['plain_s']:>9.3f}{r['capture_s']:>11.3f}{r['ratio']:>7.2f}"
            f"{_mb(r['file_bytes']):>9}{_mb(r['snapshot_bytes']):>14}"
        )
        if full:
            line += f"{r['full_ratio']:>15.2f}{_mb(r['full_file_bytes']):>12}"
        print(line, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "capture_cost.json")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-full", dest="full", action="store_false", help="skip the dedup=0 runs")
    parser.add_argument("--only", nargs="*", help="example names (default: all)")
    args = parser.parse_args()

    examples = json.loads((EXAMPLES / "examples.json").read_text())
    if args.only:
        examples = [e for e in examples if e["name"] in args.only]
    rows = []
    for example in examples:
        rows.append(example_row(example, args.repeats, args.full))
        print(json.dumps(rows[-1]), flush=True)
    print()
    print_table(rows)
    ratios = [r["ratio"] for r in rows]
    result = {
        "device": device_name(),
        "iterations": ITERATIONS,
        "repeats": args.repeats,
        "target_ratio": TARGET_RATIO,
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_max": max(ratios),
        "met": sum(r["met"] for r in rows),
        "examples": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nratio median {result['ratio_median']}, max {result['ratio_max']}; "
          f"{result['met']} of {len(rows)} at most {TARGET_RATIO}; wrote {args.out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

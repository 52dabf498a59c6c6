"""Where does Accordo's speedup part from the CUDA-event harness's? A diagnostic for issue 3's speedup_error
(GPU machine). Its run on an H100 (benchmarks/results/speedup_probe.json) found the cause in the
instrument: CUPTI timed the harness's own launches as it timed the applications', but CUPTI's activity
records slowed some memory-bound kernels, and events add a fixed cost per launch (accordo/speedup.py).

For each example and its fix it records:
* CUPTI durations of the kernel by launch index (median over 3 runs), at 5 launches per run (what
  benchmarks/validate.py times) and at 200, and the speedup from each: is the gap a start-of-run effect
  (cold caches, clocks ramping up in a short run) that more launches remove?
* the harness's per-launch-event medians (EventHarness.speedup) and batched-event medians (one event pair
  around 50 back-to-back launches, divided by 50): is the gap the events' own cost on short kernels?
* the harness's own launches timed by CUPTI and by its events at once (the harness runs in a child
  process under the Accordo tracer): do the two instruments agree on identical launches?
* the GPU's clocks and throttle reasons before, between and after (read-only nvidia-smi queries).

    python -m benchmarks.speedup_probe [--out FILE] [EXAMPLE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from accordo.signature import kernel_pattern
from benchmarks.event_harness import EventHarness
from benchmarks.validate import first_launch, prepare_pair
from profiler.trace import run_traced

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DEFAULT = ["reduction_bank", "strided_copy", "atomic_reduction", "histogram_atomic", "transpose_bank"]
CLOCKS = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def clocks() -> str:
    query = ["nvidia-smi", f"--query-gpu={CLOCKS}", "--format=csv,noheader"]
    return subprocess.run(query, capture_output=True, text=True, check=False).stdout.strip()


def traced_durations(example: dict, iterations: str, runs: int = 3) -> dict[str, object]:
    pattern = re.compile(kernel_pattern(example["kernel"]))
    folder = EXAMPLES / example["name"]
    sides: dict[str, list[list[int]]] = {"original": [], "fixed": []}
    for _ in range(runs):
        for side, app in (("original", example["app"]), ("fixed", example["fixed_app"])):
            traced = run_traced([app, iterations], cwd=folder, timeout_s=120)
            sides[side].append([x.duration_ns for x in traced.launches if pattern.search(x.demangled)])
    row: dict[str, object] = {}
    for side, per_run in sides.items():
        row[f"{side}_by_index"] = [
            statistics.median(r[i] for r in per_run) for i in range(min(8, len(per_run[0])))
        ]
        row[f"{side}_median_ns"] = statistics.median(x for r in per_run for x in r)
    ratios = [sum(a) / sum(b) for a, b in zip(sides["original"], sides["fixed"], strict=True)]
    row["sum_speedup"] = statistics.median(ratios)
    row["median_speedup"] = row["original_median_ns"] / row["fixed_median_ns"]  # type: ignore[operator]
    return row


def harness_row(example: dict) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp, EventHarness() as harness:
        prepared = prepare_pair(harness, example, Path(tmp))
        events = harness.speedup(prepared["original"], prepared["fixed"])
        batch = {side: statistics.median(harness.time_batched(prepared[side])) for side in prepared}
    return {
        "event_original_ns": events.ref_median_ns,
        "event_fixed_ns": events.cand_median_ns,
        "event_speedup": events.speedup,
        "batched_original_ns": batch["original"],
        "batched_fixed_ns": batch["fixed"],
        "batched_speedup": batch["original"] / batch["fixed"],
    }


HARNESS_LAUNCHES = 200
HARNESS_WARMUP = 20


def harness_child(folder: Path) -> None:
    """In the traced child: time each side's captured launch 0 with events, original first, then fixed,
    ``HARNESS_WARMUP`` untimed and ``HARNESS_LAUNCHES`` timed launches each; write the medians."""
    from accordo.capture import read_capture

    shapes = json.loads((folder / "shapes.json").read_text())
    medians = {}
    with EventHarness() as harness:
        prepared = {}
        for side in ("original", "fixed"):
            launch = read_capture(next((folder / side).glob("capture-*.bin"))).launches[0]
            shape = shapes[side]
            kernel = harness.load(folder / f"{side}.cubin", launch.name)
            prepared[side] = harness.prepare(
                kernel, launch, tuple(shape["grid"]), tuple(shape["block"]), shape["smem"]
            )
        for side in ("original", "fixed"):
            times = harness.time(prepared[side], iterations=HARNESS_LAUNCHES, warmup=HARNESS_WARMUP)
            medians[side] = statistics.median(times)
    (folder / "events.json").write_text(json.dumps(medians))


def harness_under_cupti(example: dict) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shapes, names = {}, set()
        for side in ("original", "fixed"):
            first = first_launch(example, side, work, capture_dir=work / side)
            names.add(first.launch.name)
            shapes[side] = {"grid": first.shape.grid, "block": first.shape.block, "smem": first.shape.smem}
        (work / "shapes.json").write_text(json.dumps(shapes))
        child = run_traced([sys.executable, __file__, "--child", str(work)], cwd=ROOT, timeout_s=600)
        events = json.loads((work / "events.json").read_text())
    kernel = [x.duration_ns for x in child.launches if x.name in names]
    per_side = HARNESS_WARMUP + HARNESS_LAUNCHES
    if len(kernel) != 2 * per_side:
        return {"error": f"expected {2 * per_side} traced harness launches of {names}, got {len(kernel)}"}
    cupti = {
        "original": statistics.median(kernel[HARNESS_WARMUP:per_side]),
        "fixed": statistics.median(kernel[per_side + HARNESS_WARMUP :]),
    }
    return {
        "event_original_ns": events["original"],
        "event_fixed_ns": events["fixed"],
        "event_speedup": events["original"] / events["fixed"],
        "cupti_original_ns": cupti["original"],
        "cupti_fixed_ns": cupti["fixed"],
        "cupti_speedup": cupti["original"] / cupti["fixed"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("examples", nargs="*", default=DEFAULT)
    out_dir = Path(os.environ.get("OUT", ROOT / "benchmarks" / "results"))
    parser.add_argument("--out", type=Path, default=out_dir / "speedup_probe.json")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        harness_child(args.child)
        return 0
    examples = {e["name"]: e for e in json.loads((EXAMPLES / "examples.json").read_text())}
    results = {}
    for name in args.examples:
        example = examples[name]
        row: dict[str, object] = {"clocks_start": clocks()}
        row["traced_5"] = traced_durations(example, "5")
        row["traced_200"] = traced_durations(example, "200")
        row["clocks_mid"] = clocks()
        row["harness"] = harness_row(example)
        row["harness_under_cupti"] = harness_under_cupti(example)
        row["clocks_end"] = clocks()
        results[name] = row
        print(name, json.dumps(row), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")  # per example: a cut-off run keeps some
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Accordo benchmark (GPU machine): are its verdicts right, what does capture cost, and can its speedup
be trusted?

* cases: every pair of examples/accordo_cases/cases.json and every bundled example against its fixed
  version (small iteration counts), validated; the verdict and the failure reason must be the expected.
* capture_ratio: wall time of the reference run under buffer capture (every launch of the kernel, every
  reachable allocation, before and after) over its plain run, per example; median over examples.
* speedup_error: Accordo's speedup (its default timer, CUDA events around each launch inside the apps;
  whole app runs, ABAB) against a standalone CUDA-event harness timing the same two kernels on the same
  captured inputs (benchmarks/event_harness.py); relative error. speedup_error_cupti: the same with
  Accordo's CUPTI timer; harness_batched_speedup: the harness with one event pair around 50 launches.
* speedup_cv: the measured speedup over --repeats independent measurements; coefficient of variation.
  Beside the examples, two timing pairs whose kernel is the first one its process launches
  (examples/accordo_timing): launched once (a single-launch app: its only launch is timed, cold) and
  five times (the first launch left out as warm-up).
* verdict_stability: the float-sum cases judged 20 times each (benchmarks/verdicts.py); the share of
  verdicts and reasons that were the expected ones.

    python -m benchmarks.validate --out benchmarks/results/validate.json [--record DIR] [--repeats 3]
        [--only cases|examples|speedup|stability] [--pairs NAME ...]

A run of some sections keeps the others' results from --out, and ``--pairs`` keeps the other examples'
and speedup pairs' rows; each measured row names its ``device``, ``devices`` says which GPUs measured each
section, and the table says when they differ. The output is written after every example and speedup
pair, so a run stopped by a time limit keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from accordo.capture import Launch, run_capture
from accordo.signature import kernel_pattern
from accordo.speedup import measure_speedup
from accordo.validate import ValidationOptions, validate
from benchmarks.common import device_name, plain_wall
from benchmarks.event_harness import EventHarness, PreparedLaunch, compile_cubin
from benchmarks.verdicts import print_table as print_stability
from benchmarks.verdicts import stability
from profiler.trace import KernelLaunch, run_traced

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CASES = EXAMPLES / "accordo_cases"
ITERATIONS = "5"  # launches of the example kernels per validation run
CASE_N = "4173"  # first length of the accordo cases when recording capture fixtures
# The fix of aos_field changes the data layout (AoS to SoA): the kernel is given different input bytes, which
# Accordo must refuse; it is not a drop-in kernel rewrite.
EXAMPLE_EXPECTED = {"aos_field": ("fail", "input_mismatch")}
L2_FLUSH_BYTES = 256 << 20  # over 4x the L2 of an H100/H200
# Pairs whose kernel is the first its process launches (examples/accordo_timing), for the speedup table.
TIMING_PAIRS = [
    {"name": name, "folder": "accordo_timing", "kernel": "iterate", "source": "iterate.cu",
     "app": "bin/iterate", "fixed_app": "bin/iterate_fixed", "args": [launches]}
    for name, launches in (("first_launch_single", "1"), ("first_launch_x5", "5"))
]  # fmt: skip


SECTIONS = ("cases", "examples", "speedup", "stability")


def section_devices(
    previous: dict, measured: set[str], device: str, rows: dict[str, list[dict]] | None = None
) -> dict[str, str | None]:
    """The GPU that measured each section: this run's for the sections it measured, the earlier output's
    for the others (``device`` of an output written before sections were recorded apart). A section whose
    ``rows`` name their ``device`` (examples and speedup pairs, which ``--pairs`` measures a few at a time)
    says every GPU its rows were measured on, "; " between them; a row without one was the section's
    earlier GPU's."""
    earlier = previous.get("devices") or {section: previous.get("device") for section in SECTIONS}
    devices: dict[str, str | None] = {}
    for section in SECTIONS:
        kept = (rows or {}).get(section)
        if kept:
            names = {
                n for r in kept for n in (r.get("device") or earlier.get(section) or "").split("; ") if n
            }
            devices[section] = "; ".join(sorted(names)) or None
        else:
            devices[section] = device if section in measured else earlier.get(section)
    return devices


def replaced(rows: list[dict], row: dict) -> list[dict]:
    """``rows`` with ``row`` in place of the earlier row of its pair (at the end when there was none)."""
    return [r for r in rows if r["pair"] != row["pair"]] + [row]


def _folder(example: dict) -> Path:
    return EXAMPLES / example.get("folder", example["name"])


def _argv(example: dict, side: str) -> list[str]:
    """The command of one side of a pair, run in its folder (``./``: a script's name alone would be looked
    up on PATH)."""
    return [
        f"./{example['app'] if side == 'original' else example['fixed_app']}",
        *example.get("args", [ITERATIONS]),
    ]


def case_rows(record: Path | None) -> list[dict]:
    rows = []
    for case in json.loads((CASES / "cases.json").read_text()):
        name = Path(case["candidate"]).name
        timeout = 20.0 if name == "hang" else 120.0
        options = ValidationOptions(runs=10, timeout_s=timeout)
        started = time.perf_counter()
        result = validate(
            case["kernel"], [case["reference"]], [case["candidate"]], cwd=CASES, options=options
        )
        row = {
            "pair": f"accordo_cases/{name}",
            "expected": case["expected"],
            "expected_reason": case["reason"],
            "verdict": "pass" if result.passed else "fail",
            "reason": result.failure,
            "detail": result.reason,
            "speedup": result.speedup.median if result.speedup else None,
            "seconds": round(time.perf_counter() - started, 2),
        }
        row["right"] = row["verdict"] == row["expected"] and row["reason"] == row["expected_reason"]
        rows.append(row)
        print(json.dumps(row), flush=True)
        if record is not None:
            validate(
                case["kernel"],
                [case["reference"], CASE_N],
                [case["candidate"], CASE_N],
                cwd=CASES,
                options=ValidationOptions(measure=False, timeout_s=timeout),
                keep_captures=record / name,
            )
    return rows


def example_rows(only: Sequence[str] | None = None) -> Iterator[dict]:
    """Each bundled example's fix judged (``only``: these examples), a row as soon as it is measured."""
    for example in json.loads((EXAMPLES / "examples.json").read_text()):
        if only and example["name"] not in only:
            continue
        folder = _folder(example)
        ref, cand = _argv(example, "original"), _argv(example, "fixed")
        expected, reason = EXAMPLE_EXPECTED.get(example["name"], ("pass", None))
        started = time.perf_counter()
        result = validate(example["kernel"], ref, cand, cwd=folder, options=ValidationOptions(runs=10))
        seconds = time.perf_counter() - started
        plain = plain_wall(ref, folder)
        capture = run_capture(ref, kernel_regex=kernel_pattern(example["kernel"]), cwd=folder, timeout_s=600)
        row = {
            "pair": example["name"],
            "expected": expected,
            "expected_reason": reason,
            "verdict": "pass" if result.passed else "fail",
            "reason": result.failure,
            "detail": result.reason,
            "speedup": result.speedup.median if result.speedup else None,
            "interval": [result.speedup.low, result.speedup.high] if result.speedup else None,
            "noise_max": result.noise_max,
            "seconds": round(seconds, 2),
            "plain_s": round(plain, 3),
            "capture_s": round(capture.wall_s, 3),
            "capture_ratio": round(capture.wall_s / plain, 3),
            "captured_bytes": sum(b.nbytes for x in capture.capture.launches for b in x.buffers)
            if capture.capture
            else 0,
        }
        row["right"] = row["verdict"] == expected and row["reason"] == reason
        print(json.dumps(row), flush=True)
        yield row


def measured_kernel(example: dict) -> str:
    """The kernel a speedup row times on both sides: the example's ``main`` instantiation where its kernel
    name stands for several (tile_sums: six ``geom::tile_sums<TILE>``, the first launched of which,
    ``TILE=1``, reads coalesced already), else its kernel. Accordo sums every launch its pattern matches
    and the harness times the first captured one, so a name matching several would set a sum beside one."""
    return example.get("main") or example["kernel"]


def harness_row(example: dict, repeats: int, with_cupti: bool = True) -> dict:
    """Accordo's speedup (events timer, repeated; CUPTI timer, once) and the CUDA-event harness's, for one
    example and its fix, on the same kernel (``measured_kernel``)."""
    folder = _folder(example)
    pattern = kernel_pattern(measured_kernel(example))
    ref, cand = _argv(example, "original"), _argv(example, "fixed")

    def accordo(timer: str) -> float:
        return measure_speedup(ref, cand, kernel_regex=pattern, runs=10, timeout_s=120, reference_cwd=folder,
                               candidate_cwd=folder, timer=timer).median  # fmt: skip

    medians = [accordo("events") for _ in range(repeats)]
    cupti = accordo("cupti") if with_cupti else None
    with tempfile.TemporaryDirectory() as tmp, EventHarness() as harness:
        prepared = prepare_pair(harness, example, Path(tmp))
        warm = harness.speedup(prepared["original"], prepared["fixed"])
        cold = harness.speedup(prepared["original"], prepared["fixed"], flush_l2_bytes=L2_FLUSH_BYTES)
        batched = {side: statistics.median(harness.time_batched(prepared[side])) for side in prepared}
    events = statistics.median(medians)
    return {
        "pair": example["name"],
        "accordo_speedups": [round(m, 4) for m in medians],
        "accordo_speedup": round(events, 4),
        "accordo_cupti_speedup": round(cupti, 4) if cupti else None,
        "harness_speedup": round(warm.speedup, 4),
        "harness_speedup_cold_l2": round(cold.speedup, 4),
        "harness_batched_speedup": round(batched["original"] / batched["fixed"], 4),
        "speedup_error": round(abs(events / warm.speedup - 1), 4),
        "speedup_error_cupti": round(abs(cupti / warm.speedup - 1), 4) if cupti else None,
        "speedup_error_cold_l2": round(abs(events / cold.speedup - 1), 4),
        "speedup_cv": round(statistics.stdev(medians) / statistics.fmean(medians), 4)
        if repeats > 1
        else None,
    }


@dataclass(frozen=True)
class FirstLaunch:
    """One side of an example pair, ready for the harness: its kernel compiled to a cubin, the first captured
    launch of the kernel (its inputs) and that launch's grid, block and shared memory from a trace."""

    cubin: Path
    launch: Launch
    shape: KernelLaunch


def first_launch(example: dict, side: str, workdir: Path, *, capture_dir: Path | None = None) -> FirstLaunch:
    """``side`` ("original" or "fixed") of ``example``, run with ITERATIONS launches; the cubin goes to
    ``workdir/<side>.cubin``, the capture files to ``capture_dir`` (kept) or a temporary directory."""
    folder = _folder(example)
    source = example["source"] if side == "original" else fixed_source(example)
    argv = _argv(example, side)
    cubin = compile_cubin(folder / source, workdir / f"{side}.cubin")
    pattern = kernel_pattern(measured_kernel(example))
    capture = run_capture(argv, kernel_regex=pattern, cwd=folder, timeout_s=600, output_dir=capture_dir)
    launch = capture.capture.launches[0]
    traced = run_traced(argv, cwd=folder, timeout_s=120)
    return FirstLaunch(cubin, launch, next(x for x in traced.launches if x.name == launch.name))


def prepare_pair(harness: EventHarness, example: dict, workdir: Path) -> dict[str, PreparedLaunch]:
    """Both sides' first launches loaded into ``harness`` with their captured inputs."""
    prepared = {}
    for side in ("original", "fixed"):
        first = first_launch(example, side, workdir)
        kernel = harness.load(first.cubin, first.launch.name)
        shape = first.shape
        prepared[side] = harness.prepare(kernel, first.launch, shape.grid, shape.block, shape.smem)
    return prepared


def _or_nan(value: float | None) -> float:
    return float("nan") if value is None else value


def fixed_source(example: dict) -> str:
    source = Path(example["source"])
    return f"{source.stem}_fixed{source.suffix}"


def summary(
    previous: dict,
    measured: set[str],
    device: str,
    cases: list[dict],
    examples: list[dict],
    speed: list[dict],
    stable: dict | None,
) -> dict:
    """validate.json from its sections' rows; ``measured``: the sections this run has measured so far."""
    all_cases = cases + examples
    cvs = [r["speedup_cv"] for r in speed if r["speedup_cv"] is not None]
    cupti_errors = [r["speedup_error_cupti"] for r in speed if r.get("speedup_error_cupti") is not None]
    return {
        "device": device,
        "devices": section_devices(previous, measured, device, {"examples": examples, "speedup": speed}),
        "cases": [
            {k: r[k] for k in ("pair", "expected", "expected_reason", "verdict", "reason", "detail", "right")}
            for r in all_cases
        ],
        "verdicts_right": sum(r["right"] for r in all_cases) / len(all_cases) if all_cases else None,
        "capture_ratio": statistics.median(r["capture_ratio"] for r in examples) if examples else None,
        "capture_ratio_max": max((r["capture_ratio"] for r in examples), default=None),
        "speedup_error": statistics.median(r["speedup_error"] for r in speed) if speed else None,
        "speedup_error_max": max((r["speedup_error"] for r in speed), default=None),
        "speedup_error_cold_l2": statistics.median(r["speedup_error_cold_l2"] for r in speed)
        if speed
        else None,
        "speedup_error_cupti": statistics.median(cupti_errors) if cupti_errors else None,
        "speedup_error_cupti_max": max(cupti_errors, default=None),
        "timer": "events",
        "speedup_cv": statistics.median(cvs) if cvs else None,
        "speedup_cv_max": max(cvs, default=None),
        "verdict_stability": stable["verdict_stability"] if stable else None,
        "stability": stable,
        "cases_accordo": cases,
        "cases_examples": examples,
        "speedup_pairs": speed,
        "targets": {
            "capture_ratio": 1.5,
            "speedup_error": 0.02,
            "speedup_cv": 0.01,
            "verdict_stability": 1.0,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "validate.json")
    parser.add_argument("--record", type=Path, help="keep the accordo_cases capture files (small n) here")
    parser.add_argument("--repeats", type=int, default=3, help="independent speedup measurements per pair")
    parser.add_argument("--only", choices=SECTIONS, action="append")
    parser.add_argument(
        "--pairs", nargs="+", help="measure only these examples and speedup pairs (keep the others' rows)"
    )
    parser.add_argument("--stability-repeats", type=int, default=20, help="verdicts per float-sum case")
    parser.add_argument(
        "--cupti", action=argparse.BooleanOptionalAction, default=True, help="also time with the CUPTI timer"
    )
    args = parser.parse_args()
    parts = set(args.only or SECTIONS)
    if shutil.which("nvidia-smi") is None:
        print("this benchmark needs an NVIDIA GPU", file=sys.stderr)
        return 3
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    manifest = json.loads((EXAMPLES / "examples.json").read_text())
    device = device_name()
    cases = previous.get("cases_accordo", [])
    examples = previous.get("cases_examples", [])
    speed = previous.get("speedup_pairs", [])
    stable = previous.get("stability")
    measured: set[str] = set()  # the sections done so far: a run stopped midway claims no other

    def write() -> dict:
        """The output as it stands, written at once: a run stopped midway keeps every row it measured."""
        result = summary(previous, measured, device, cases, examples, speed, stable)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        return result

    if "cases" in parts:
        cases = case_rows(args.record)
        measured.add("cases")
        write()
    if "examples" in parts:
        for row in example_rows(args.pairs):
            examples = replaced(examples, {**row, "device": device})
            write()
        measured.add("examples")
    if "speedup" in parts:
        subprocess.run(["make"], cwd=EXAMPLES / "accordo_timing", check=True, capture_output=True)
        # the harness compiles a CUDA source's kernel: the compiled examples (Triton and PyTorch have none)
        pairs = [
            e
            for e in manifest
            if e["build"] is not None and EXAMPLE_EXPECTED.get(e["name"], ("pass",))[0] == "pass"
        ]
        for example in [*pairs, *TIMING_PAIRS]:
            if args.pairs and example["name"] not in args.pairs:
                continue
            row = harness_row(example, args.repeats, with_cupti=args.cupti)
            speed = replaced(speed, {**row, "device": device})
            print(json.dumps(row), flush=True)
            write()
        measured.add("speedup")
    if "stability" in parts:
        stable = stability(args.stability_repeats)
        measured.add("stability")
    result = write()
    all_cases = cases + examples
    devices = result["devices"]
    print()
    print(f"{'pair':<28} {'expected':<26} {'verdict':<26} right")
    for r in all_cases:
        exp = f"{r['expected']} {r['expected_reason'] or ''}".strip()
        got = f"{r['verdict']} {r['reason'] or ''}".strip()
        print(f"{r['pair']:<28} {exp:<26} {got:<26} {'yes' if r['right'] else 'NO'}")
    print()
    print(
        f"{'pair':<20} {'capture/plain':>13} {'accordo x':>10} {'harness x':>10} {'error':>7} "
        f"{'cupti x':>9} {'error':>7} {'batched x':>10} {'cold x':>8} {'cv':>7}"
    )
    nan = float("nan")
    captured = {r["pair"]: r["capture_ratio"] for r in examples}
    for s in speed:
        print(
            f"{s['pair']:<20} {captured.get(s['pair'], nan):>13.2f} {s.get('accordo_speedup', nan):>10.3f} "
            f"{s.get('harness_speedup', nan):>10.3f} {s.get('speedup_error', nan):>7.2%} "
            f"{_or_nan(s.get('accordo_cupti_speedup')):>9.3f} {_or_nan(s.get('speedup_error_cupti')):>7.2%} "
            f"{s.get('harness_batched_speedup', nan):>10.3f} {s.get('harness_speedup_cold_l2', nan):>8.3f} "
            f"{_or_nan(s.get('speedup_cv')):>7.2%}"
        )
    if stable:
        print_stability(stable)
    print()
    print(
        f"device {result['device']}: verdicts right {result['verdicts_right']}, capture ratio "
        f"{result['capture_ratio']} (target <= 1.5), speedup error {result['speedup_error']} "
        f"(target <= 0.02), speedup cv {result['speedup_cv']} (target <= 0.01), verdict stability "
        f"{result['verdict_stability']} (target 1.0)"
    )
    if len(set(devices.values())) > 1:
        print("sections measured on different GPUs: " + ", ".join(f"{k} {v}" for k, v in devices.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Diagnosis benchmark (GPU machine): cost of each pass against the plain run, and whether it was right.

For every bundled example and its fixed version: the plain run and the timing pass (Accordo's
CUPTI tracer), interleaved, medians of --repeats (timing_s is the traced application's wall time;
timing_with_parsing_s adds reading and ranking the trace); then --repeats full diagnoses with 'auto'
whose counter pass is timed by the engine, each after one more plain run (counters_s: their median;
plain_s: the median of all 2 x --repeats plain runs, so the ratio's denominator is sampled beside its
numerator; a single run of these 0.3-0.6 s apps varies by 10-20%). Every repeat must reach the
same verdict (`stable`). Right means: the hottest bottlenecked kernel
is the example's kernel, the selected formula is the expected one, and the first hot line is the
line marked `// intelliperf: <formula>`. Controls and fixed versions must show no bottleneck. An example
with a "library" prefix must list the kernels with that prefix as library kernels and not profile
them. Per formula, the estimated saving is set beside the saving the fixed version measured (the
example kernel's median time, original against fixed, from the two timing passes).

    python -m benchmarks.diagnose --out benchmarks/results/diagnose.json [--record tests/fixtures/gpu]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path

from benchmarks.common import earlier_outputs, joined_rows, plain_wall
from intelliperf.contract import Application, JobSpec, Report
from intelliperf.contract.kernel_names import function_name
from intelliperf.engine.diagnose import run_diagnosis
from intelliperf.gpu.nvidia.backend import NvidiaBackend

ROOT = Path(__file__).resolve().parents[1]

EXAMPLES = ROOT / "examples"


def is_kernel(demangled: str, name: str) -> bool:
    """Whether a kernel is the example's: its function name without namespaces, template arguments or
    parameters (`void geom::tile_sums<32>(float2 const*, float*, int)` is `tile_sums`; a Triton kernel's
    demangled name is the bare name)."""
    return function_name(demangled) == name


def marker_line(source: Path, formula: str) -> int | None:
    for number, text in enumerate(source.read_text().splitlines(), start=1):
        if f"intelliperf: {formula}" in text:
            return number
    return None


def judge(report: Report, example: dict, variant: str) -> dict:
    """Kernel, formula and line verdicts for one report."""
    expected_formula = example["formula"] if variant == "original" else None
    flagged = [d for d in report.diagnoses if d.present]
    library_ok = library_verdict(report, example)
    if expected_formula is None:
        # Fixed versions and controls: the example's kernel was profiled (so it is a project kernel, not a
        # library's) and nothing fired. In a multi-kernel app the fixed kernel need not stay the hottest.
        diagnosed = {d.kernel for d in report.diagnoses}
        kernel_ok = any(
            is_kernel(k.demangled, example["kernel"]) and k.name in diagnosed for k in report.kernels
        )
        return {
            "library_ok": library_ok,
            "kernel_ok": kernel_ok,
            "formula_ok": not flagged,
            "line_ok": not flagged,
            "flagged": len(flagged),
        }
    selected = report.selected
    kernel_ok = selected is not None and any(
        k.name == selected.kernel and is_kernel(k.demangled, example["kernel"]) for k in report.kernels
    )
    formula_ok = selected is not None and selected.formula == expected_formula
    line_ok = False
    if selected is not None:
        chosen = report.selected_diagnosis
        assert chosen is not None and chosen.present, "a selection is made of a present diagnosis"
        want = marker_line(EXAMPLES / example["name"] / example["source"], expected_formula)
        loc = chosen.locations[0] if chosen.locations else None
        line_ok = loc is not None and Path(loc.file).name == example["source"] and loc.line == want
    return {
        "library_ok": library_ok,
        "kernel_ok": kernel_ok,
        "formula_ok": formula_ok,
        "line_ok": line_ok,
        "flagged": len(flagged),
    }


def library_verdict(report: Report, example: dict) -> bool:
    """Library kernels are marked, never profiled, and cost one warning line, not one per kernel."""
    diagnosed = {d.kernel for d in report.diagnoses}
    library = [k for k in report.kernels if k.library]
    if any(k.name in diagnosed for k in library):
        return False
    if any("no counters were collected" in w for w in report.warnings):
        return False
    prefix = example.get("library")
    if prefix is None:
        return True
    expected = [k for k in report.kernels if prefix in k.demangled]
    return bool(expected) and all(k.library for k in expected)


def regions_verdict(report: Report, example: dict, variant: str) -> bool | None:
    """Triton examples: Proton's intra-kernel profile names the marked line as the region with the most
    cycles (None where there is nothing to check)."""
    if example.get("language") != "triton":
        return None
    profile = report.intra_kernel
    if profile is None or not profile.regions:
        return False
    if variant != "original" or not example["formula"]:
        return True
    hottest = max((r for r in profile.regions if r.kind != "kernel"), key=lambda r: r.share, default=None)
    want = marker_line(EXAMPLES / example["name"] / example["source"], example["formula"])
    return hottest is not None and hottest.line == want


def verdict_of(report: Report) -> tuple[object, ...]:
    """What a diagnosis concluded: the selection and every bottleneck found, with its first line."""
    selected = (report.selected.kernel, report.selected.formula) if report.selected else None
    present = sorted(
        (d.kernel, d.formula, d.locations[0].line if d.locations else None)
        for d in report.diagnoses
        if d.present
    )
    return selected, tuple(present)


def example_kernels_ns(report: Report, example: dict) -> dict[str, float]:
    """Median time of each of the example's kernels (a template's instantiations), hottest first."""
    return {k.name: k.median_ns for k in report.kernels if is_kernel(k.demangled, example["kernel"])}


def measure(example: dict, variant: str, repeats: int, record: Path | None) -> dict:
    folder = EXAMPLES / example["name"]
    app = example["app"] if variant == "original" else example["fixed_app"]
    argv = ["./" + app]
    backend = NvidiaBackend(record=record / example["name"] / variant if record else None)
    plain, timing, timing_total = [], [], []
    for _ in range(repeats):
        plain.append(plain_wall(argv, folder, repeats=1))
        start = time.perf_counter()
        traced = backend.time_kernels(argv, cwd=folder, timeout_s=300)
        timing_total.append(time.perf_counter() - start)
        timing.append(traced.wall_s)
    spec = JobSpec(applications=[Application(command=argv)], formula="auto")  # top_n as the CLI's
    reports = []
    for _ in range(repeats):  # a plain run beside each diagnosis as well: the ratio's two sides, same minutes
        plain.append(plain_wall(argv, folder, repeats=1))
        reports.append(run_diagnosis(spec, backend=backend, project=folder))
    report = reports[-1]  # the one --record keeps
    counters = [r.passes.counters_s or 0.0 for r in reports]
    if record:
        out = record / example["name"] / variant
        (out / "device.json").write_text(report.device.model_dump_json(indent=1) if report.device else "{}")
        (out / "report.json").write_text(report.model_dump_json(indent=1))
    verdict = judge(report, example, variant)
    selected = report.selected
    chosen = report.selected_diagnosis
    estimated = chosen.estimated_saving_fraction if chosen is not None else None
    medians = example_kernels_ns(report, example)
    return {
        "kernel_median_ns": next(iter(medians.values()), None),
        "example_kernels_ns": medians,
        "selected_kernel": selected.kernel if selected else None,
        "estimated_saving": estimated,
        "undecided": sorted({d.formula for d in report.diagnoses if not d.decided}),
        "warnings": report.warnings,
        "example": example["name"],
        "variant": variant,
        "expected_formula": example["formula"] if variant == "original" else None,
        "selected_formula": selected.formula if selected else None,
        "plain_s": round(statistics.median(plain), 4),
        "timing_s": round(statistics.median(timing), 4),
        "timing_with_parsing_s": round(statistics.median(timing_total), 4),
        "counters_s": round(statistics.median(counters), 4),
        "counters_s_runs": [round(c, 4) for c in counters],
        "counter_ratio": round(statistics.median(counters) / statistics.median(plain), 3),
        "stable": len({verdict_of(r) for r in reports}) == 1,
        "kernels": len(report.kernels),
        "profiled_kernels": len({d.kernel for d in report.diagnoses}),
        "setup_s": report.passes.setup_s,
        "regions_s": report.passes.regions_s,
        "regions_ok": regions_verdict(report, example, variant),
        **verdict,
    }


def savings(rows: list[dict]) -> dict[str, list[dict]]:
    """Per formula: each example's estimated saving beside the saving its fixed version measured."""
    by_formula: dict[str, list[dict]] = {}
    fixed = {r["example"]: r for r in rows if r["variant"] == "fixed"}
    for row in rows:
        after = fixed.get(row["example"])
        if row["expected_formula"] is None or after is None:
            continue
        before_ns, after_ns = row["kernel_median_ns"], after["kernel_median_ns"]
        chosen = row.get("selected_kernel")
        if chosen in row.get("example_kernels_ns", {}):  # the instantiation that was chosen, in both runs
            before_ns, after_ns = row["example_kernels_ns"][chosen], after["example_kernels_ns"].get(chosen)
        measured = 1 - after_ns / before_ns if before_ns and after_ns else None
        by_formula.setdefault(row["expected_formula"], []).append(
            {
                "example": row["example"],
                "estimated_saving": row["estimated_saving"],
                "measured_saving": round(measured, 4) if measured is not None else None,
                "measured_speedup": round(before_ns / after_ns, 3) if before_ns and after_ns else None,
            }
        )
    return by_formula


def saving_errors(by_formula: dict[str, list[dict]]) -> list[float]:
    """|estimated - measured| saving fraction of every bottlenecked example whose fix was measured."""
    return [
        round(abs(e["estimated_saving"] - e["measured_saving"]), 4)
        for entries in by_formula.values()
        for e in entries
        if e["estimated_saving"] is not None and e["measured_saving"] is not None
    ]


def summarize(rows: list[dict], device: str) -> dict:
    """The benchmark's figures over its rows (one per example and variant)."""
    originals = [r for r in rows if r["variant"] == "original"]
    right = [r for r in originals if r["kernel_ok"] and r["formula_ok"] and r["line_ok"] and r["library_ok"]]
    must_be_clean = [r for r in rows if r["expected_formula"] is None]
    by_formula = savings(rows)
    errors = saving_errors(by_formula)
    result = {
        "device": device,
        "examples": rows,
        "accuracy": round(len(right) / len(originals), 4) if originals else 0.0,
        "false_positives": sum(1 for r in must_be_clean if r["flagged"]),
        "clean_runs": len(must_be_clean),
        "timing_overhead": round(statistics.median(r["timing_s"] / r["plain_s"] - 1 for r in rows), 4),
        "timing_overhead_with_parsing": round(
            statistics.median(r["timing_with_parsing_s"] / r["plain_s"] - 1 for r in rows), 4
        ),
        "counter_ratio": round(statistics.median(r["counters_s"] / r["plain_s"] for r in rows), 3),
        "counter_ratio_max": round(max(r["counters_s"] / r["plain_s"] for r in rows), 3),
        "library_ok": all(r["library_ok"] for r in rows),
        "unstable": sorted(f"{r['example']}/{r['variant']}" for r in rows if not r.get("stable", True)),
        "undecided": sorted({f"{r['example']}/{r['variant']}: {f}" for r in rows for f in r["undecided"]}),
        "savings": by_formula,
        "saving_error_median": round(statistics.median(errors), 4) if errors else None,
        "saving_error_max": max(errors) if errors else None,
        "targets": {
            "timing_overhead": 0.05,
            "counter_ratio": 10.0,
            "accuracy": 1.0,
            "false_positives": 0,
            "saving_error_median": 0.10,
            "saving_error_max": 0.20,
        },
    }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "diagnose.json")
    parser.add_argument("--record", type=Path, default=None, help="keep every export here (test fixtures)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=None, help="comma-separated example names")
    parser.add_argument(
        "--rows-from",
        type=Path,
        nargs="*",
        default=[],
        help="earlier outputs of this script on the same device (one device call is limited) whose rows "
        "join this run's; an example measured again here replaces its earlier rows",
    )
    args = parser.parse_args()
    device = NvidiaBackend().device().name
    try:
        earlier = earlier_outputs(args.rows_from, device)  # before the run: no GPU time lost
    except ValueError as error:
        parser.error(str(error))
    subprocess.run(["make", "-C", str(EXAMPLES), "-j8", "-s"], check=True)
    manifest = json.loads((EXAMPLES / "examples.json").read_text())
    rows = []
    for example in manifest:
        if args.only and example["name"] not in args.only.split(","):
            continue
        for variant in ("original", "fixed"):
            row = measure(example, variant, args.repeats, args.record)
            rows.append(row)
            print(json.dumps(row), flush=True)
    rows = joined_rows(earlier, rows, key="example", order=[e["name"] for e in manifest])
    result = summarize(rows, device)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    header = f"{'example':18} {'variant':8} {'expected':17} {'selected':17} {'plain s':>8} {'timing x':>9} "
    header += f"{'counters x':>10}  kernel  formula line    library"
    print(header)
    for r in rows:
        verdicts = " ".join(
            f"{'ok' if r[key] else 'NO':7}" for key in ("kernel_ok", "formula_ok", "line_ok", "library_ok")
        )
        print(
            f"{r['example']:18} {r['variant']:8} {r['expected_formula'] or '-':17} "
            f"{r['selected_formula'] or '-':17} {r['plain_s']:8.3f} {r['timing_s'] / r['plain_s']:9.3f} "
            f"{r['counters_s'] / r['plain_s']:10.2f}  {verdicts}"
        )
    print(f"{'formula':18} {'example':18} {'estimated':>9} {'measured':>9} {'speedup':>8}")
    for formula, entries in result["savings"].items():
        for e in entries:
            est = "-" if e["estimated_saving"] is None else f"{e['estimated_saving']:.0%}"
            meas = "-" if e["measured_saving"] is None else f"{e['measured_saving']:.0%}"
            speed = "-" if e["measured_speedup"] is None else f"{e['measured_speedup']:.2f}x"
            print(f"{formula:18} {e['example']:18} {est:>9} {meas:>9} {speed:>8}")
    print(
        f"device {device}: accuracy {result['accuracy']:.0%}, false positives {result['false_positives']}"
        f"/{result['clean_runs']}, timing overhead {result['timing_overhead']:+.1%}, "
        f"counter pass {result['counter_ratio']:.1f}x plain (at most {result['counter_ratio_max']:.1f}x), "
        f"verdicts that changed between repeats: {result['unstable'] or 'none'}"
    )
    if result["saving_error_median"] is not None:
        print(
            f"estimated vs measured saving: median error {result['saving_error_median']:.2f} (target 0.10), "
            f"largest {result['saving_error_max']:.2f} (target 0.20)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

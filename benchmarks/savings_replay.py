"""Estimated savings against measured fixes, on the recordings (no GPU): how far today's formulas' estimates
are from what each example's fixed version measured on the GPU machine.

The diagnosis benchmark (benchmarks/diagnose.py, GPU) measures each fixed version and writes its rows; its
estimates are those of the formulas of its day. This replays each bottlenecked example's recorded profile
(tests/fixtures/gpu) with the formulas of this checkout, 'auto', and puts the chosen estimate beside the
measured saving of those rows, so a change to a formula's estimate is judged on the same measurements
before it reaches the GPU. The measured savings are read, never re-measured: a new example needs its
GPU run first.

    python -m benchmarks.savings_replay [--rows benchmarks/results/diagnose.json ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from benchmarks.diagnose import savings

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_ROWS = (RESULTS / "diagnose.json", RESULTS / "diagnose_python.json")
TARGETS = {"saving_error_median": 0.10, "saving_error_max": 0.20}


def replayed_estimate(example: str) -> tuple[str | None, float | None]:
    """The formula 'auto' chooses on the example's recorded original, and its estimated saving."""
    from tests.recorded import replay  # the recordings' reader, with the examples' sources

    report = replay(example, formula="auto")
    chosen = report.selected_diagnosis
    return (chosen.formula, chosen.estimated_saving_fraction) if chosen is not None else (None, None)


def compare(rows: list[dict]) -> list[dict]:
    """One entry per bottlenecked example with a measured fix: the estimate then and now, the measurement."""
    entries = []
    for formula, measured in savings(rows).items():
        for e in measured:
            if e["measured_saving"] is None:
                continue
            chosen, estimate = replayed_estimate(e["example"])
            entries.append(
                {
                    "example": e["example"],
                    "expected_formula": formula,
                    "chosen_formula": chosen,
                    "estimated_then": e["estimated_saving"],
                    "estimated_now": estimate,
                    "measured_saving": e["measured_saving"],
                    "error_now": round(abs(estimate - e["measured_saving"]), 4)
                    if estimate is not None
                    else None,
                }
            )
    return entries


def summarize(entries: list[dict], sources: list[str]) -> dict:
    errors = [e["error_now"] for e in entries if e["error_now"] is not None]
    return {
        "rows_from": sources,
        "entries": entries,
        "saving_error_median": round(statistics.median(errors), 4) if errors else None,
        "saving_error_max": max(errors) if errors else None,
        "unchosen": sorted(e["example"] for e in entries if e["chosen_formula"] != e["expected_formula"]),
        "targets": TARGETS,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, nargs="+", default=list(DEFAULT_ROWS))
    parser.add_argument("--out", type=Path, default=RESULTS / "savings_replay.json")
    args = parser.parse_args(argv)
    rows = [row for path in args.rows for row in json.loads(path.read_text())["examples"]]
    result = summarize(
        compare(rows), [str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in args.rows]
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{'example':18} {'formula':17} {'then':>6} {'now':>6} {'measured':>9} {'error':>6}")
    for e in result["entries"]:
        now = "-" if e["estimated_now"] is None else f"{e['estimated_now']:.0%}"
        error = "-" if e["error_now"] is None else f"{e['error_now']:.2f}"
        print(
            f"{e['example']:18} {e['chosen_formula'] or '-':17} {e['estimated_then']:6.0%} {now:>6} "
            f"{e['measured_saving']:9.0%} {error:>6}"
        )
    print(
        f"saving error: median {result['saving_error_median']} (target {TARGETS['saving_error_median']}), "
        f"largest {result['saving_error_max']} (target {TARGETS['saving_error_max']}); "
        f"chosen formula not the expected one: {result['unchosen'] or 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

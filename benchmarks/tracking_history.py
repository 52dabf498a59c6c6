"""A short history of transpose_bank on the GPU as continuous mode sees it, with counters reused by code hash.

Twelve commits: six run the fixed kernel (bin/transpose_fixed), six the bank-conflicted one (bin/transpose),
each diagnosed by the real engine (`intelliperf run -f diagnoseOnly --counter_store`) with one counter
store for the whole history. Per commit: the kernel's median time, its code hash, whether the counter pass
ran or the kernel's counters were reused, the counter pass's seconds and the seconds reuse saved. Only the
first commit of each kernel's code should pay the counter pass. tests/test_gpu_tracking.py runs the same
history and checks the regression is found at commit 6.

    python -m benchmarks.tracking_history     # on a GPU machine: prints a table, writes the JSON
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "tracking_history.json"
EXAMPLE = ROOT / "examples" / "transpose_bank"
FAST, SLOW = "./bin/transpose_fixed", "./bin/transpose"
HISTORY = [FAST] * 6 + [SLOW] * 6
"""The regression lands at commit 6 (10 commits at least: the change-point detector's MIN_COMMITS)."""
KERNEL = "_Z15transpose_tiledPKfPfii"


def built_project(work: Path) -> Path:
    """A copy of transpose_bank with both binaries built (RuntimeError where make fails)."""
    project = work / "transpose_bank"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("bin"))
    built = subprocess.run(["make"], cwd=project, capture_output=True, text=True, timeout=600)
    if built.returncode != 0:
        raise RuntimeError(f"make failed in {project}:\n{built.stderr}")
    return project


def measured(project: Path, app: str, out: Path, store: Path) -> dict:
    """The engine's report of one commit (diagnosis of its top kernel, counters through ``store``)."""
    argv = [sys.executable, "-m", "intelliperf", "run", "-f", "diagnoseOnly", "--top_n", "1"]
    argv += ["-p", str(project), "-o", str(out), "--counter_store", str(store), "--", app]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"intelliperf exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return json.loads(out.read_text())


def row_of(number: int, app: str, report: dict) -> dict:
    kernel = next(k for k in report["kernels"] if k["name"] == KERNEL)
    passes = report["passes"]
    return {
        "commit": number,
        "app": app,
        "median_ns": kernel["median_ns"],
        "code_hash": kernel["code_hash"],
        "shape_hash": kernel["shape_hash"],
        "counters": "reused" if report["reused_counters"] else "measured",
        "counters_s": passes["counters_s"],
        "counters_saved_s": passes["counters_saved_s"],
        "bottlenecks": sorted(d["formula"] for d in report["diagnoses"] if d["present"]),
    }


def run_history(project: Path, work: Path) -> list[dict]:
    """Every commit's report, in order, measured with one counter store."""
    store = work / "counters"
    return [measured(project, app, work / f"report-{n}.json", store) for n, app in enumerate(HISTORY)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tracking-history-") as folder:
        work = Path(folder)
        reports = run_history(built_project(work), work)
    rows = [row_of(n, app, report) for n, (app, report) in enumerate(zip(HISTORY, reports, strict=True))]
    header = ["commit", "app", "median µs", "code hash", "counters", "pass s", "saved s"]
    print("{:>6} {:<22} {:>10} {:<17} {:<9} {:>7} {:>7}".format(*header))
    for row in rows:
        spent = "" if row["counters_s"] is None else f"{row['counters_s']:.2f}"
        saved = "" if row["counters_saved_s"] is None else f"{row['counters_saved_s']:.2f}"
        print(f"{row['commit']:>6} {row['app']:<22} {row['median_ns'] / 1000:>10.1f} "
              f"{row['code_hash']!s:<17} {row['counters']:<9} {spent:>7} {saved:>7}")  # fmt: skip
    spent = sum(r["counters_s"] or 0.0 for r in rows)
    saved = sum(r["counters_saved_s"] or 0.0 for r in rows)
    summary = {
        "device": reports[0]["device"]["name"],
        "host": platform.node(),
        "commits": len(rows),
        "counter_passes_run": sum(r["counters"] == "measured" for r in rows),
        "counter_pass_s_spent": round(spent, 3),
        "counter_pass_s_saved": round(saved, 3),
        "rows": rows,
    }
    print(f"counter pass run {summary['counter_passes_run']} of {len(rows)} commits: "
          f"{spent:.1f} s spent, {saved:.1f} s saved")  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

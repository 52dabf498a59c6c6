"""Where a judgement's time goes (GPU machine): each bundled example's fix judged against its original by
``accordo.validate.validate`` as the loop judges it, the time of every step it announces, and a profile of
the judge's own Python.

    python -m benchmarks.judge_cost [--only transpose_bank,clean_saxpy] [--iterations 20]
                                    [--out benchmarks/results/judge_cost.json]

Per example: the plain run's wall time (median of 3), one capture run's, the judgement's total and each
step's seconds (from one progress message to the next), the verdict with its checks, and the judge's
functions that took the most time of their own (cProfile, ``tottime``). A step that is far slower than the
application runs it makes is Python going over buffers: that is what the profile names.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accordo.capture import run_capture
from accordo.signature import kernel_pattern
from accordo.validate import ValidationOptions, validate
from benchmarks.common import device_name
from profiler.build import native_library

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DEFAULT = "transpose_bank,clean_saxpy,triton_strided"
TOP_FUNCTIONS = 8


def steps(events: list[tuple[float, str]], total: float) -> list[dict]:
    """Each announced step's seconds: from its message to the next one (the last to ``total``)."""
    ends = [t for t, _ in events[1:]] + [total] if events else []
    pairs = zip(events, ends, strict=True)
    return [{"step": what, "s": round(end - start, 2)} for (start, what), end in pairs]


def hot_functions(profile: cProfile.Profile, top: int = TOP_FUNCTIONS) -> list[dict]:
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [
        {"function": f"{Path(file).name}:{line}({name})", "calls": calls, "own_s": round(own, 2)}
        for (file, line, name), (_, calls, own, _, _) in rows
    ]


def command(example: dict, which: str, iterations: str) -> list[str]:
    app = example[which]
    return ([f"./{app}"] if example["build"] else [sys.executable, app]) + [iterations]


def judge(example: dict, library: Path, scratch: Path, iterations: str) -> dict:
    target = scratch / example["name"]
    shutil.copytree(EXAMPLES / example["name"], target, ignore=shutil.ignore_patterns("bin"))
    if example["build"]:
        subprocess.run(["make", "-j8"], cwd=target, check=True, capture_output=True, timeout=600)
    reference, candidate = command(example, "app", iterations), command(example, "fixed_app", iterations)
    plain = []
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run(reference, cwd=target, check=True, capture_output=True, timeout=600)
        plain.append(time.perf_counter() - began)
    began = time.perf_counter()
    run = run_capture(
        reference, kernel_regex=kernel_pattern(example["kernel"]), cwd=target, timeout_s=600, library=library
    )
    capture_s = time.perf_counter() - began
    events: list[tuple[float, str]] = []
    began = time.perf_counter()

    def say(message: str) -> None:
        events.append((time.perf_counter() - began, message))
        print(f"  {example['name']} +{events[-1][0]:7.2f} s {message}", flush=True)

    profile = cProfile.Profile()
    profile.enable()
    result = validate(
        example["kernel"], reference, candidate, cwd=target, progress=say, library=library,
        options=ValidationOptions(runs=10, min_runs=3),
    )  # fmt: skip
    profile.disable()
    total = time.perf_counter() - began
    return {
        "name": example["name"],
        "plain_s": round(statistics.median(plain), 3),
        "capture_s": round(capture_s, 3),
        "capture_bytes": run.capture.file_bytes if run.capture else None,
        "judge_s": round(total, 2),
        "passed": result.passed,
        "failure": result.failure,
        "checks": {c.name: c.outcome for c in result.checks},
        "steps": steps(events, total),
        "hot_functions": hot_functions(profile),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=DEFAULT, help="comma-separated example names")
    parser.add_argument("--iterations", default="20", help="the examples' launch count (the loop's)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "judge_cost.json")
    args = parser.parse_args(argv)
    manifest = {e["name"]: e for e in json.loads((EXAMPLES / "examples.json").read_text())}
    unknown = [n for n in args.only.split(",") if n not in manifest]
    if unknown:
        parser.error(f"not bundled examples: {', '.join(unknown)}")
    library = native_library()
    rows = []
    with tempfile.TemporaryDirectory(prefix="judge-cost-") as scratch:
        for name in args.only.split(","):
            rows.append(judge(manifest[name], library, Path(scratch), args.iterations))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"device": device_name(), "examples": rows}, indent=1) + "\n")
    print(f"{'example':16} {'plain s':>8} {'capture s':>9} {'judge s':>8}  slowest step")
    for r in rows:
        slowest = max(r["steps"], key=lambda s: s["s"])
        print(f"{r['name']:16} {r['plain_s']:8.2f} {r['capture_s']:9.2f} {r['judge_s']:8.1f}  "
              f"{slowest['s']:.1f} s {slowest['step'][:60]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Verdict stability (GPU machine): does Accordo give the same, right verdict every time?

The float-sum cases (examples/accordo_sums) sum millions of floats; the reference with one atomicAdd per
element, so its result moves from run to run. Each case is judged ``repeats`` times. A repeat is what one
validation does: the reference's calibration (``noise_runs`` captures, the number accordo.validate takes
for a reference whose first runs disagree) and one capture of the candidate, compared by
accordo.compare. To keep the GPU time affordable the reference runs come from a pool of ``pool`` captures
and each repeat draws its own ``noise_runs`` of them at random (seeded); every repeat captures the
candidate afresh.

    python -m benchmarks.verdicts [--repeats 20] [--pool 48] [--out FILE]
    python -m benchmarks.verdicts --record DIR   # small captures for the CPU tests (tests/fixtures)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from accordo.capture import Capture, run_capture
from accordo.compare import compare_captures
from accordo.signature import kernel_pattern
from accordo.validate import ValidationOptions, capture_reference, check_candidate

ROOT = Path(__file__).resolve().parents[1]
SUMS = ROOT / "examples" / "accordo_sums"
DEFAULT_N = "4194381"  # 2^22 + 77: the cases' default
RECORD_N = "16461"  # 2^14 + 77: small enough for capture fixtures in git
DEFAULT_POOL = 48  # reference captures each repeat draws its noise_runs calibration from
PARALLEL = 4  # captures at a time: they share the GPU, each mostly waits on copies and process start


def built_cases() -> dict:
    """examples/accordo_sums built, and its cases.json."""
    subprocess.run(["make", "-j8"], cwd=SUMS, check=True, capture_output=True)
    return json.loads((SUMS / "cases.json").read_text())


def sum_result(capture: Capture) -> float:
    """The sum a run wrote (its one launch's output, after the kernel)."""
    out = capture.launches[0].buffer(1, "after")
    assert out is not None
    return float(out.view("<f4")[0])


def capture_many(argv: list[str], kernel: str, count: int) -> list[Capture]:
    """``count`` captures of ``argv`` (each a fresh process), PARALLEL at a time."""

    def one(_: int) -> Capture:
        run = run_capture(argv, kernel_regex=kernel_pattern(kernel), cwd=SUMS, timeout_s=300)
        if run.status != "ok" or run.capture is None:
            raise RuntimeError(f"{' '.join(argv)} {run.message}: {run.stderr_tail}")
        return run.capture

    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(one, range(count)))


def judge(
    pool: list[Capture], candidates: list[Capture], runs: int, options: ValidationOptions
) -> list[dict]:
    """One verdict per candidate capture, each against its own draw of ``runs`` reference captures."""
    verdicts = []
    for repeat, candidate in enumerate(candidates):
        reference = random.Random(repeat).sample(pool, runs)
        result = compare_captures(
            reference, candidate, atol=options.atol, rtol=options.rtol, alpha=options.alpha
        )
        verdicts.append(
            {
                "verdict": "pass" if result.passed else "fail",
                "reason": result.failure,
                "bound_use": result.bound_use,
                "detail": result.reason,
            }
        )
    return verdicts


def case_row(case: dict, verdicts: list[dict]) -> dict:
    expected = (case["expected"], case["reason"])
    right = sum((v["verdict"], v["reason"]) == expected for v in verdicts)
    uses = [v["bound_use"] for v in verdicts if v["bound_use"] is not None]
    wrong_details = [v["detail"] for v in verdicts if (v["verdict"], v["reason"]) != expected]
    return {
        "case": Path(case["candidate"]).name,
        "data": case["data"],
        "expected": case["expected"],
        "expected_reason": case["reason"],
        "repeats": len(verdicts),
        "right": right,
        "outcomes": dict(Counter(f"{v['verdict']} {v['reason'] or ''}".strip() for v in verdicts)),
        "bound_use_median": statistics.median(uses) if uses else None,
        "bound_use_max": max(uses) if uses else None,
        "bound_use_min": min(uses) if uses else None,
        "wrong_example": wrong_details[0] if wrong_details else None,
        "undetectable": case.get("undetectable"),
    }


def stability(repeats: int, pool_size: int = DEFAULT_POOL, n: str | None = None) -> dict:
    manifest = built_cases()
    kernel = manifest["kernel"]
    options = ValidationOptions()
    rows = []
    for data in dict.fromkeys(case["data"] for case in manifest["cases"]):
        args = [n or DEFAULT_N, "1", data]
        started = time.perf_counter()
        pool = capture_many([manifest["reference"], *args], kernel, pool_size)
        results = [sum_result(c) for c in pool]
        mean, sd = statistics.fmean(results), statistics.stdev(results)
        print(
            f"{data}: reference pool of {pool_size} runs in {time.perf_counter() - started:.0f} s; "
            f"result mean {mean:.7g}, sd {sd:.3g}",
            flush=True,
        )
        for case in (c for c in manifest["cases"] if c["data"] == data):
            candidates = capture_many([case["candidate"], *args], kernel, repeats)
            row = case_row(case, judge(pool, candidates, options.noise_runs, options))
            row["candidate_results"] = [sum_result(c) for c in candidates[:3]]
            row["reference_mean"] = mean
            row["reference_sd"] = sd
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "wrong_example"}), flush=True)
    decided = [r for r in rows if not r["undetectable"]]
    total = sum(r["repeats"] for r in decided)
    return {
        "rows": rows,
        "verdict_stability": sum(r["right"] for r in decided) / total if total else None,
        "verdict_stability_all": sum(r["right"] for r in rows) / sum(r["repeats"] for r in rows),
        "repeats": repeats,
        "reference_pool": pool_size,
        "noise_runs": options.noise_runs,
        "alpha": options.alpha,
    }


def record(directory: Path) -> None:
    """Keep the capture files of a signed-data validation of every case (RECORD_N elements) under
    ``directory``: the reference's calibration (``reference-<i>/``) and each case (``<case>/candidate/``)."""
    manifest = built_cases()
    options = ValidationOptions(measure=False)
    args = [RECORD_N, "1", "signed"]
    reference = capture_reference(
        manifest["kernel"], [manifest["reference"], *args], cwd=SUMS, options=options, keep_captures=directory
    )
    for case in (c for c in manifest["cases"] if c["data"] == "signed"):
        name = Path(case["candidate"]).name
        result = check_candidate(
            reference, [case["candidate"], *args], cwd=SUMS, options=options, keep_captures=directory / name
        )
        print(
            f"recorded {name}: {'pass' if result.passed else result.failure} ({result.bound_use})", flush=True
        )


def print_table(result: dict) -> None:
    print(f"\n{'case':<12} {'data':<7} {'expected':<22} {'right':>7}  outcomes (bound use median/max)")
    for r in result["rows"]:
        expected = f"{r['expected']} {r['expected_reason'] or ''}".strip()
        use = (
            f"{r['bound_use_median']:.3g}/{r['bound_use_max']:.3g}"
            if r["bound_use_median"] is not None
            else "-"
        )
        right = f"{r['right']:>3}/{r['repeats']:<3}"
        note = "  [undetectable by design: not counted]" if r["undetectable"] else ""
        print(f"{r['case']:<12} {r['data']:<7} {expected:<22} {right}  {r['outcomes']} ({use}){note}")
    print(
        f"\nverdict stability: {result['verdict_stability']:.4f} over the detectable cases (target 1.0); "
        f"{result['verdict_stability_all']:.4f} over all"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--pool", type=int, default=DEFAULT_POOL, help="reference captures to draw from")
    parser.add_argument("--n", help="elements to sum (default: the cases' 2^22 + 77)")
    parser.add_argument("--out", type=Path, help="write the result as JSON here")
    parser.add_argument("--record", type=Path, help="only record small capture fixtures into this folder")
    args = parser.parse_args()
    if args.record is not None:
        record(args.record)
        return 0
    result = stability(args.repeats, args.pool, args.n)
    print_table(result)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

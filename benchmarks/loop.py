"""The optimization loop on every bundled example, on the GPU, with a scripted model serving the fix.

For each example, `intelliperf run -f <formula> -b make -p <copy of the example> -- <app>` runs as a user
runs it (a subprocess; no -b for the Triton and PyTorch examples, which compile as they run), its model a
ScriptedLLM on 127.0.0.1 that answers with the example's known fix
(the SEARCH/REPLACE blocks that turn its source into the fixed version). Controls run with `-f auto`
and must end without asking the model anything. One attempt's wall time is split into build, validate
(buffer capture and comparison), measure (interleaved timing) and counters (the formula's metric
re-measured), LLM time excluded; the target is at most 3x (build time + plain run time) plus the
counter pass.

    python -m benchmarks.loop [--out benchmarks/results/loop.json] [--reports benchmarks/results/loop]
                              [--record tests/fixtures/loop] [--only NAME] [--rows-from earlier.json ...]

Each row also carries what the judge reported on the attempt: the in-application and the isolated
(replayed, L2 flushed and warm) speedups, the checks it ran with their outcomes, and whether a reproducer was
saved. For every success the pull request is opened, as the worker opens it, on a GitHub REST server on
127.0.0.1 (tests/support/fake_github.py): its body is kept beside the report (``pull_request.md``) and the
row says whether the reproducer went with it. The reproducer itself is then removed from the reports
folder (the row keeps its size, ``reproducer_bytes``).

``--record`` also runs the feedback scenario (garbage, a non-compiling edit, a wrong one, the fix) on
transpose_bank and keeps its report: the CPU tests replay its validation results.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import device_name, earlier_outputs, joined_rows, plain_wall
from benchmarks.loop_scenarios import FEEDBACK_EXAMPLE, MANIFEST, feedback_script, known_fix
from intelliperf.contract import JobSpec, Report
from tests.support.fake_github import FakeGitHub
from tests.support.scripted_llm import ScriptedLLM
from worker.pull_request import GitHubTarget, open_pull_request

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
KEY = "sk-scripted-benchmark"
GITHUB_TOKEN = "ghp_loop_benchmark_0123456789abcdef"
ATTEMPT_PARTS = ("build", "validate", "measure", "counters")
# Kernel launches per run. Buffer capture copies every launch's buffers, so the loop wants a short but
# representative workload; the examples' default (hundreds of launches) would spend minutes capturing.
ITERATIONS = "20"
# The Python examples' buffers are 64-256 MB a launch and every run pays the interpreter's start.
PYTHON_ITERATIONS = "3"


def run_cli(
    project: Path,
    app: list[str],
    formula: str,
    server: ScriptedLLM,
    out: Path,
    attempts: int,
    build: str | None = "make",
    unittest_command: str | None = None,
) -> Report:
    command = [
        sys.executable, "-m", "intelliperf", "run",
        "-f", formula, *(["-b", build] if build else []), "-p", str(project),
        *(["--unittest_command", unittest_command] if unittest_command else []),
        "-m", "scripted", "-r", "openai", "--api_base", server.api_base,
        "--num_attempts", str(attempts),
        "-o", str(out / "report.json"), "--summary_file", str(out / "summary.md"),
        "--reproducer_dir", str(out / "reproducer"),
        "--", *app,
    ]  # fmt: skip
    env = {
        **os.environ,
        "LLM_GATEWAY_KEY": KEY,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    log = out / "intelliperf.log"  # the progress display, as a user sees it
    with log.open("w") as stderr:
        done = subprocess.run(
            command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr, timeout=900
        )
    if not (out / "report.json").is_file():
        raise RuntimeError(
            f"intelliperf run failed with exit code {done.returncode}:\n{log.read_text()[-3000:]}"
        )
    return Report.model_validate_json((out / "report.json").read_text())


def fresh_copy(name: str, scratch: Path) -> Path:
    project = scratch / name
    shutil.copytree(EXAMPLES / name, project, ignore=shutil.ignore_patterns("bin"))
    return project


def open_pull(name: str, report: Report, reproducer: Path, out: Path) -> dict:
    """The pull request the worker would open for ``report``, on a fake GitHub holding the example's
    original files; its body is written to ``out/pull_request.md``."""
    original = {
        p.relative_to(EXAMPLES / name).as_posix(): p.read_bytes()
        for p in (EXAMPLES / name).rglob("*")
        if p.is_file() and "bin" not in p.relative_to(EXAMPLES / name).parts
    }
    with FakeGitHub(token=GITHUB_TOKEN) as github:
        repo = github.add_repository(f"acme/{name}", original)
        spec = JobSpec.model_validate(
            {
                "repository": {
                    "url": f"https://github.com/acme/{name}.git",
                    "commit": repo.refs["refs/heads/main"],
                },
                "applications": [{"command": "true"}],
                "pull_request": {"create_pr": True},
            }
        )
        target = GitHubTarget(GITHUB_TOKEN, github.api_url, retries=0, throttle=False)
        opened = open_pull_request(
            report, spec, f"loop-{name}", target, reproducer if reproducer.is_dir() else None
        )
        [pull] = github.pulls(f"acme/{name}")
        pushed = repo.refs.get(f"refs/heads/{opened.branch}-reproducer")
    (out / "pull_request.md").write_text(pull["body"])
    section = (
        pull["body"].split("### Reproducer", 1)[-1].strip() if "### Reproducer" in pull["body"] else None
    )
    return {
        "pull_request": pull["html_url"],
        "pull_request_reproducer": pushed is not None,
        "pull_request_reproducer_note": section.splitlines()[0] if section else None,
    }


def judge_fields(report: Report) -> dict:
    """What the judge said about the attempt the best result came from (else the last attempt)."""
    attempt = report.best_attempt or (report.attempts[-1] if report.attempts else None)
    validation = attempt.validation if attempt else None
    isolated = validation.isolated_speedup if validation else None
    warm = validation.isolated_speedup_warm if validation else None
    return {
        "isolated_speedup": round(isolated.median, 4) if isolated else None,
        "isolated_speedup_warm": round(warm.median, 4) if warm else None,
        "checks": {c.name: c.outcome for c in validation.checks} if validation else {},
        "reproducer": report.best.reproducer is not None if report.best else False,
    }


def summarize(example: dict, report: Report, plain_s: float, requests: int) -> dict:
    attempt = report.attempts[-1] if report.attempts else None
    seconds = attempt.seconds if attempt else {}
    speedup = attempt.speedup if attempt else None
    attempt_s = sum(seconds.get(part, 0.0) for part in ATTEMPT_PARTS)
    build_s = seconds.get("build")
    counters_s = seconds.get("counters")
    budget = 3 * ((build_s or 0.0) + plain_s) + (counters_s or 0.0)
    project_build_s = report.passes.build_s or 0.0  # the build command on the whole project (diagnosis)
    project_budget = 3 * (project_build_s + plain_s) + (counters_s or 0.0)
    return {
        "name": example["name"],
        "formula": example["formula"] or "auto",
        "expected": "success" if example["formula"] else "skipped",
        "status": report.optimization.status if report.optimization else None,
        "judge": report.optimization.judge if report.optimization else None,
        "note": report.optimization.note if report.optimization else None,
        "llm_requests": requests,
        "attempts": len(report.attempts),
        "attempt_status": attempt.status if attempt else None,
        "reason": attempt.reason if attempt else None,
        "success": report.best is not None,
        "speedup": round(speedup.median, 4) if speedup else None,  # in the application
        "speedup_low": round(speedup.low, 4) if speedup else None,
        "speedup_high": round(speedup.high, 4) if speedup else None,
        "timing_runs": speedup.runs if speedup else None,
        "metric": report.best.metric_name if report.best else None,
        "metric_before": attempt.metric_before if attempt else None,
        "metric_after": attempt.metric_after if attempt else None,
        "attempt_s": round(attempt_s, 3) if attempt else None,
        **{f"{part}_s": seconds.get(part) for part in ATTEMPT_PARTS},
        "plain_s": round(plain_s, 4),
        "attempt_budget_s": round(budget, 3) if attempt else None,
        "within_budget": attempt_s <= budget if attempt else None,
        "project_build_s": round(project_build_s, 3),
        "project_budget_s": round(project_budget, 3) if attempt else None,
        "within_project_budget": attempt_s <= project_budget if attempt else None,
        **judge_fields(report),
    }


def run_example(example: dict, scratch: Path, reports: Path) -> dict:
    name = example["name"]
    project = fresh_copy(name, scratch)
    if example["build"]:
        subprocess.run(example["build"], shell=True, cwd=project, check=True, capture_output=True)
    app = ["./" + example["app"], PYTHON_ITERATIONS if example.get("language") == "triton" else ITERATIONS]
    plain_s = plain_wall(app, project)
    shutil.rmtree(project / "bin", ignore_errors=True)
    script = [known_fix(name)] if example["formula"] else []
    out = reports / name
    out.mkdir(parents=True, exist_ok=True)
    with ScriptedLLM(script, key=KEY) as server:
        report = run_cli(
            project,
            app,
            example["formula"] or "auto",
            server,
            out,
            attempts=1,
            build=example["build"],
            unittest_command=example.get("unittest_command"),
        )
        requests = len(server.requests)
    row = summarize(example, report, plain_s, requests)
    if report.best is not None:
        row |= open_pull(name, report, out / "reproducer", out)
    return row | drop_reproducer(out / "reproducer")


def drop_reproducer(folder: Path) -> dict:
    """The reproducer's size in bytes, and the folder removed: a capture of the kernel's inputs (128 and
    256 MiB for histogram_atomic and transpose_bank) is not a result to keep under benchmarks/results."""
    if not folder.is_dir():
        return {"reproducer_bytes": None}
    size = sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())
    shutil.rmtree(folder)
    return {"reproducer_bytes": size}


def record_feedback(record: Path, scratch: Path) -> dict:
    example = next(e for e in MANIFEST if e["name"] == FEEDBACK_EXAMPLE)
    project = fresh_copy(FEEDBACK_EXAMPLE, scratch / "feedback")
    record.mkdir(parents=True, exist_ok=True)
    with ScriptedLLM(feedback_script(), key=KEY) as server:
        app = ["./" + example["app"], ITERATIONS]
        report = run_cli(project, app, example["formula"], server, record, attempts=6)
        prompts = [request["messages"][-1]["content"] for request in server.requests]
    (record / "prompts.json").write_text(json.dumps(prompts, indent=1) + "\n")
    return {"feedback_statuses": [a.status for a in report.attempts]}


def run_all(reports: Path, record: Path | None, only: str | None) -> tuple[list[dict], dict]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="intelliperf-loop-bench-") as tmp:
        for example in MANIFEST:
            if only and example["name"] not in only.split(","):
                continue
            row = run_example(example, Path(tmp), reports)
            rows.append(row)
            print(json.dumps(row), flush=True)
        feedback = record_feedback(record, Path(tmp)) if record else {}
    return rows, feedback


def resummarize(previous: Path, reports: Path) -> tuple[list[dict], dict]:
    old = json.loads(previous.read_text())
    by_name = {row["name"]: row for row in old["examples"]}
    rows = []
    for example in MANIFEST:
        if example["name"] not in by_name:
            continue
        report = Report.model_validate_json((reports / example["name"] / "report.json").read_text())
        row = by_name[example["name"]]
        rows.append(summarize(example, report, row["plain_s"], row["llm_requests"]))
    kept = {key: old[key] for key in ("device", "feedback_statuses") if key in old}
    return rows, kept


def checks_text(row: dict) -> str:
    checks = " ".join(
        f"{name}{'' if outcome == 'passed' else '=' + outcome}" for name, outcome in row["checks"].items()
    )
    if "pull_request_reproducer" in row:
        checks += " / PR " + ("with reproducer" if row["pull_request_reproducer"] else "without reproducer")
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "loop.json")
    parser.add_argument("--reports", type=Path, default=ROOT / "benchmarks" / "results" / "loop")
    parser.add_argument("--record", type=Path, default=None, help="record the feedback scenario here")
    parser.add_argument("--only", default=None, help="comma-separated example names")
    parser.add_argument(
        "--rows-from",
        type=Path,
        nargs="*",
        default=[],
        help="earlier outputs of this script on the same device whose rows join this run's; an example "
        "run again here replaces its earlier row",
    )
    parser.add_argument(
        "--resummarize",
        action="store_true",
        help="no GPU: rebuild --out from the reports under --reports and the plain times in --out",
    )
    args = parser.parse_args()
    if args.resummarize:
        rows, feedback = resummarize(args.out, args.reports)
    else:
        try:
            earlier = earlier_outputs(args.rows_from, device_name())  # before the run: no GPU time lost
        except ValueError as error:
            parser.error(str(error))
        rows, feedback = run_all(args.reports, args.record, args.only)
        rows = joined_rows(earlier, rows, key="name", order=[e["name"] for e in MANIFEST])
        for output in earlier:
            if "feedback_statuses" in output and "feedback_statuses" not in feedback:
                feedback["feedback_statuses"] = output["feedback_statuses"]
    optimized = [r for r in rows if r["expected"] == "success"]
    timed = [r for r in rows if r["attempt_s"] is not None]
    result = {
        "device": feedback.pop("device", None) or device_name(),
        "examples": rows,
        "success_rate": round(sum(r["success"] for r in optimized) / len(optimized), 4) if optimized else 0.0,
        "controls_skipped": all(
            r["status"] == "skipped" and r["llm_requests"] == 0 for r in rows if r not in optimized
        ),
        "attempt_over_budget_median": round(
            statistics.median(r["attempt_s"] / r["attempt_budget_s"] for r in timed), 3
        ) if timed else None,
        "attempt_over_project_budget_max": round(max(
            r["attempt_s"] / r["project_budget_s"] for r in timed
        ), 3) if timed else None,
        "target": "attempt_s <= 3 * (build_s + plain_s) + counters_s",
        "budget_note": "attempt_budget_s takes build_s as the attempt's own rebuild (only the edited file "
        "is recompiled); project_budget_s takes the project's build command as the diagnosis ran it",
        **feedback,
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    header = (
        f"{'example':18} {'formula':17} {'status':10} {'speedup':>8} {'95% interval':>17} "
        f"{'metric before':>13} {'after':>10} {'attempt s':>9} {'build':>6} {'valid.':>6} {'meas.':>6} "
        f"{'ctrs':>6} {'plain':>6} {'budget':>6} {'alone':>7} {'warm':>7}  checks / PR reproducer"
    )
    print(header)
    for r in rows:
        interval = f"{r['speedup_low']:.3f}-{r['speedup_high']:.3f}" if r["speedup_low"] else ""

        def num(key: str, fmt: str = ".2f", row: dict = r) -> str:
            return "" if row.get(key) is None else format(row[key], fmt)

        print(
            f"{r['name']:18} {r['formula']:17} {r['status'] or '':10} {num('speedup', '.3f'):>8} "
            f"{interval:>17} "
            f"{num('metric_before', '.4g'):>13} {num('metric_after', '.4g'):>10} {num('attempt_s'):>9} "
            f"{num('build_s'):>6} {num('validate_s'):>6} {num('measure_s'):>6} {num('counters_s'):>6} "
            f"{num('plain_s'):>6} {num('attempt_budget_s'):>6} {num('isolated_speedup', '.3f'):>7} "
            f"{num('isolated_speedup_warm', '.3f'):>7}  {checks_text(r)}"
        )
    ratio = result["attempt_over_budget_median"]
    print(f"success rate {result['success_rate']:.0%}; attempt time / budget, median: {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

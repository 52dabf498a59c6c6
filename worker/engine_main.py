"""The engine as a child process of the worker: one job spec in, a report and events out.

Events are JSON lines on stdout (``{"event": "stage" | "log" | "error", ...}``); anything else the
engine or the tools print is passed on as log lines. The exit code is the engine's (see
intelliperf.errors); the report and the Markdown summary are written into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from intelliperf.contract import JobSpec
from intelliperf.errors import IntelliPerfError
from worker.counter_entries import OUTPUT as COUNTERS_OUTPUT
from worker.executor import REPRODUCER

__all__ = ["JsonLinesProgress", "main"]


def emit(event: str, **fields: object) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


class JsonLinesProgress:
    def start(self, stage: str, detail: str = "") -> None:
        emit("stage", stage=stage, message=f"{stage}: {detail}" if detail else f"{stage} …")

    def done(self, stage: str, detail: str = "") -> None:
        emit("stage", stage=stage, message=f"{stage} done" + (f": {detail}" if detail else ""))

    def note(self, message: str) -> None:
        emit("log", message=message)


def run(spec: JobSpec, project: Path, out: Path, counters: Path | None = None) -> int:
    """``counters``: the repository's counter entries (read-only); new ones go to ``out``'s counters/."""
    from intelliperf.engine.counter_store import CounterStore
    from intelliperf.engine.entry import run_spec
    from intelliperf.summary import render_summary

    replay = project / spec.replay if spec.replay else None
    store = None
    if counters is not None:
        commit = spec.repository.commit if spec.repository is not None else None
        store = CounterStore(counters, out / COUNTERS_OUTPUT, commit=commit)
    report = run_spec(
        spec,
        project,
        progress=JsonLinesProgress(),
        replay=replay,
        reproducer_dir=out / REPRODUCER,
        counter_store=store,
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(report.model_dump_json(indent=2))
    (out / "summary.md").write_text(render_summary(report))
    if report.optimization is not None and report.optimization.status == "aborted":
        emit("error", code=report.optimization.exit_code or 1, message=report.optimization.note)
        return report.optimization.exit_code or 1
    return 0


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    """The worker stops a job with SIGTERM: unwind, so each running tool's process group is killed too."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(prog="python -m worker.engine_main")
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--project", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--counters", type=Path, help="The repository's counter entries, read only")
    args = parser.parse_args(argv)
    try:
        spec = JobSpec.model_validate_json(args.spec.read_text())
        return run(spec, args.project.resolve(), args.out, args.counters)
    except IntelliPerfError as error:
        emit("error", code=error.exit_code, message=str(error))
        return error.exit_code


if __name__ == "__main__":
    sys.exit(main())

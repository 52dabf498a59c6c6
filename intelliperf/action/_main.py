"""The Action's run: inputs -> job spec -> (archive) -> POST -> events into the log -> summary, outputs.

Exit codes: 0 done (or the job's result is acceptable under ``fail_on``), 1 the job failed (or gave
no speedup) and ``fail_on`` says that fails the step, 2 a bad input, 3 the service could not be
reached or refused a request, 4 the job did not finish within ``timeout_minutes`` (it is cancelled).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from intelliperf.action._client import ServiceClient, ServiceError
from intelliperf.action._follow import TimedOut, follow_job
from intelliperf.action._inputs import (
    ActionInputs,
    GithubContext,
    InputError,
    build_spec,
    idempotency_key,
    read_inputs,
)
from intelliperf.action._pack import PackError, pack_project
from intelliperf.action._track import post_to_pull_request, pull_request_number, tracked
from intelliperf.action._workflow import Workflow

__all__ = ["EXIT_INPUT", "EXIT_JOB", "EXIT_OK", "EXIT_SERVICE", "EXIT_TIMEOUT", "main", "run"]

EXIT_OK, EXIT_JOB, EXIT_INPUT, EXIT_SERVICE, EXIT_TIMEOUT = 0, 1, 2, 3, 4


class _Stopped(Exception):
    """The runner asked the step to stop (the workflow was cancelled)."""


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    raise _Stopped(signal.Signals(signum).name)


def _fmt_speedup(value: object) -> str:
    return f"{float(value):.4g}" if isinstance(value, int | float) else ""


def _summary(job: dict[str, Any], report: dict[str, Any] | None, service_url: str) -> str:
    """The report rendered as the pull request body is, and a line about the job itself."""
    body = ""
    if report is not None:
        try:
            from intelliperf.contract.report import Report
            from intelliperf.summary import render_summary

            body = render_summary(Report.model_validate(report))
        except Exception as exc:  # a report from another version: fall back to the job's own summary
            body = str(job.get("summary") or "") or f"_The report could not be rendered here: {exc}_"
    elif job.get("summary"):
        body = str(job["summary"])
    status = job.get("status", "?")
    line = f"IntelliPerf job `{job.get('id')}` on {service_url}: **{status}**"
    if job.get("outcome"):
        line += f" ({job['outcome']})"
    if job.get("speedup"):
        line += f", speedup {_fmt_speedup(job['speedup'])}x"
    if job.get("pr_url"):
        line += f", pull request {job['pr_url']}"
    parts = [] if body else ["## IntelliPerf"]
    if body:
        parts.append(body.rstrip())
    parts.append(line)
    if job.get("error"):
        parts.append("**Error:**\n\n```text\n" + str(job["error"]).replace("```", "'''") + "\n```")
    return "\n\n".join(parts)


def _own_files(inputs: ActionInputs) -> frozenset[str]:
    """The report and diff an earlier run of the Action left in the workspace (for one application, the
    name an earlier run with several did not use): not the project's."""
    report = Path(inputs.report_file)
    return frozenset(p.as_posix() for p in (report, report.with_suffix(".diff")))


def _report_paths(inputs: ActionInputs, names: list[str]) -> list[str]:
    """The report file per application: `report_file` itself for one, `<stem>-<n>-<name>.json` for several."""
    if len(names) == 1:
        return [inputs.report_file]
    stem, suffix = Path(inputs.report_file).with_suffix(""), Path(inputs.report_file).suffix or ".json"
    return [
        f"{stem.as_posix()}-{index + 1}-{re.sub(r'[^A-Za-z0-9._-]+', '_', name)[:60]}{suffix}"
        for index, name in enumerate(names)
    ]


def _write_files(
    github: GithubContext, report_file: str, report: dict[str, Any] | None, diff: str | None
) -> tuple[str, str]:
    report_path = ""
    if report is not None:
        path = Path(github.workspace) / report_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        report_path = str(path)
    diff_path = ""
    if diff:
        path = Path(github.workspace) / (Path(report_file).with_suffix("").as_posix() + ".diff")
        path.write_text(diff, encoding="utf-8")
        diff_path = str(path)
    return report_path, diff_path


_WORST_FIRST = ("failed", "cancelled", "queued", "running", "succeeded")


def _write_reports(
    flow: Workflow,
    inputs: ActionInputs,
    github: GithubContext,
    names: list[str],
    finished: list[tuple[dict[str, Any], dict[str, Any] | None, str | None]],
) -> None:
    """Reports and diffs into the workspace; the step's outputs. With several applications the single-valued
    outputs describe the first one and the worst status; `jobs` lists every application's."""
    rows = []
    for (job, report, diff), name, report_file in zip(
        finished, names, _report_paths(inputs, names), strict=True
    ):
        report_path, diff_path = _write_files(github, report_file, report, diff)
        rows.append(
            {
                "application": name,
                "job_id": str(job.get("id", "")),
                "status": str(job.get("status", "")),
                "outcome": str(job.get("outcome") or ""),
                "speedup": _fmt_speedup(job.get("speedup")),
                "pr_url": str(job.get("pr_url") or ""),
                "report": report_path,
                "diff": diff_path,
            }
        )
    first = rows[0]
    statuses = [row["status"] for row in rows]
    worst = min(statuses, key=lambda s: _WORST_FIRST.index(s) if s in _WORST_FIRST else 0)
    flow.set_output("job_id", " ".join(row["job_id"] for row in rows))
    flow.set_output("status", worst)
    flow.set_output("outcome", first["outcome"])
    flow.set_output("speedup", first["speedup"])
    flow.set_output("pr_url", first["pr_url"])
    flow.set_output("report", first["report"])
    flow.set_output("diff", first["diff"])
    flow.set_output("jobs", json.dumps(rows))


def _verdict(flow: Workflow, inputs: ActionInputs, job: dict[str, Any]) -> int:
    status = job.get("status")
    failed = status != "succeeded"
    no_speedup = not failed and not job.get("speedup")
    if failed:
        why = f"IntelliPerf job {job['id']} {status}" + (f": {job['error']}" if job.get("error") else "")
        if inputs.fail_on == "never":
            flow.warning(why)
            return EXIT_OK
        flow.error(why)
        return EXIT_JOB
    if no_speedup and inputs.fail_on == "no-speedup":
        flow.error(f"IntelliPerf job {job['id']} found no validated speedup (outcome: {job.get('outcome')})")
        return EXIT_JOB
    return EXIT_OK


def run(env: Mapping[str, str], *, retry_wait_s: float = 1.0) -> int:
    flow = Workflow(env)
    # mask first: nothing may be printed before the runner knows the secrets
    for name in ("llm_gateway_key", "intelliperf_actions_token", "service_token"):
        value = env.get(f"INPUT_{name.upper()}", "").strip()
        if value:
            flow.mask(value)
    github = GithubContext.from_env(env)
    try:
        inputs = read_inputs(env)
        spec = build_spec(inputs, github)
    except InputError as exc:
        flow.error(str(exc), title=f"IntelliPerf: input {exc.name}")
        return EXIT_INPUT
    for note in inputs.warnings:
        flow.warning(note)
    key = idempotency_key(inputs, github, spec)
    with flow.group("IntelliPerf: job spec"):
        flow.line(spec.model_dump_json(indent=2, exclude_defaults=True))
        flow.line(f"service: {inputs.service_url}")
        if key:
            flow.line(f"Idempotency-Key: {key}")
    archive = None
    if inputs.source == "archive":
        try:
            packed = pack_project(Path(github.workspace), exclude=_own_files(inputs))
        except PackError as exc:
            flow.error(f"packing the project: {exc}")
            return EXIT_INPUT
        how = "respecting .gitignore" if packed.gitignore else "not a git work tree: everything but .git"
        flow.line(
            f"packed {packed.files} files of {github.workspace} ({len(packed.data) / 2**20:.2f} MiB, {how})"
        )
        archive = packed.data
    secrets = {"github_token": inputs.github_token or "", "llm_key": inputs.llm_gateway_key or ""}
    deadline = time.monotonic() + inputs.timeout_minutes * 60
    # one job per application, each with its own overrides: the service runs one application per job
    specs = [spec.for_application(app) for app in spec.applications]
    names = [app.display_name for app in spec.applications]
    job_ids: list[str] = []
    finished: list[tuple[dict[str, Any], dict[str, Any] | None, str | None]] = []
    with ServiceClient(inputs.service_url, inputs.service_token) as client:
        try:
            for index, (one, name) in enumerate(zip(specs, names, strict=True)):
                job, created = client.submit(
                    one,
                    archive=archive,
                    secrets={k: v for k, v in secrets.items() if v},
                    idempotency_key=key if key is None or len(specs) == 1 else f"{key}:app{index}",
                    priority=inputs.priority,
                    retry_wait_s=retry_wait_s,
                )
                job_ids.append(str(job["id"]))
                # now: a step that times out or breaks still names its jobs
                flow.set_output("job_id", " ".join(job_ids))
                what = "submitted" if created else "already submitted by an earlier try"
                flow.line(f"job {job['id']} {what}" + (f" for {name}" if len(specs) > 1 else ""))
                finished.append((job, None, None))
            if not inputs.wait:
                _write_reports(flow, inputs, github, names, finished)
                flow.add_summary(
                    "\n\n".join(_summary(job, None, inputs.service_url) for job, _, _ in finished)
                )
                return EXIT_OK
            finished = []
            for job_id, name in zip(job_ids, names, strict=True):
                previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
                try:
                    title = f"IntelliPerf job {job_id}" + (f" ({name})" if len(specs) > 1 else "")
                    with flow.group(f"{title}: events"):
                        follow_job(client, job_id, deadline, on_line=flow.line, retry_wait_s=retry_wait_s)
                finally:
                    for sig, handler in previous.items():
                        signal.signal(sig, handler)
                job = client.job(job_id)
                report = client.report(job_id)
                diff = client.diff(job_id) if job.get("status") == "succeeded" else None
                finished.append((job, report, diff))
        except ServiceError as exc:
            flow.error(str(exc), title="IntelliPerf: service")
            return EXIT_SERVICE
        except TimedOut:
            unfinished = job_ids[len(finished) :]
            flow.error(
                f"IntelliPerf job {' '.join(unfinished)} did not finish within "
                f"timeout_minutes={inputs.timeout_minutes:g}; it is cancelled"
            )
            if all([_cancel(client, flow, job_id) for job_id in unfinished]):
                flow.set_output("status", "cancelled")
            return EXIT_TIMEOUT
        except _Stopped as exc:
            unfinished = job_ids[len(finished) :]
            flow.warning(f"stopped by {exc}; cancelling IntelliPerf job {' '.join(unfinished)}")
            for job_id in unfinished:
                _cancel(client, flow, job_id)
            return 128 + signal.Signals[str(exc)].value
    for (job, _, _), name in zip(finished, names, strict=True):
        flow.line(
            f"job {job['id']}"
            + (f" ({name})" if len(specs) > 1 else "")
            + f": {job.get('status')}"
            + (f" ({job['outcome']})" if job.get("outcome") else "")
            + (f", speedup {_fmt_speedup(job['speedup'])}x" if job.get("speedup") else "")
            + (f", pull request {job['pr_url']}" if job.get("pr_url") else "")
        )
    _write_reports(flow, inputs, github, names, finished)
    sections = []
    for (job, report, _), name in zip(finished, names, strict=True):
        heading = f"## {name}\n\n" if len(specs) > 1 else ""
        sections.append(heading + _summary(job, report, inputs.service_url))
    flow.add_summary("\n\n".join(sections))
    verdict = max(_verdict(flow, inputs, job) for job, _, _ in finished)
    if inputs.mode == "track":
        verdict = max(verdict, _track(flow, inputs, github, [job for job, _, _ in finished], names))
    return verdict


def _track(
    flow: Workflow, inputs: ActionInputs, github: GithubContext, jobs: list[dict[str, Any]], names: list[str]
) -> int:
    """The kernels that moved against the base branch: in the summary and the outputs, on the pull request
    (a comment and a check run) when there is one and a token to post with."""
    done = [(job, name) for job, name in zip(jobs, names, strict=True) if job.get("status") == "succeeded"]
    if not done:
        return EXIT_OK
    try:
        with ServiceClient(inputs.service_url, inputs.service_token) as client:
            trackings = [client.tracking(str(job["id"])) for job, _ in done]
    except ServiceError as exc:
        flow.error(str(exc), title="IntelliPerf: kernel times against the base branch")
        return EXIT_SERVICE
    result = tracked(trackings, [name for _, name in done])
    flow.add_summary(result.comment)
    flow.set_output("moved_kernels", str(result.moved))
    flow.set_output("slower_kernels", str(result.slower))
    flow.line(f"{result.moved} kernel(s) moved against {result.base_branch}, {result.slower} slower")
    number = pull_request_number(github.event_path)
    if number is not None and inputs.github_token:
        try:
            for posted in post_to_pull_request(github, inputs.github_token, number, result):
                flow.line(f"posted to pull request #{number}: {posted}")
        except httpx.HTTPError as exc:
            answer = exc.response.text[:300] if isinstance(exc, httpx.HTTPStatusError) else str(exc)
            flow.warning(f"could not post to pull request #{number}: {answer}")
    elif number is not None:
        flow.warning(f"pull request #{number}: no intelliperf_actions_token to comment with")
    if result.slower and inputs.fail_on == "regression":
        flow.error(f"{result.slower} kernel(s) slower than on {result.base_branch} beyond the noise")
        return EXIT_JOB
    return EXIT_OK


def _cancel(client: ServiceClient, flow: Workflow, job_id: str | None) -> bool:
    if job_id is None:
        return False
    try:
        client.cancel(job_id)
    except ServiceError as exc:
        flow.warning(f"could not cancel job {job_id}: {exc}")
        return False
    return True


def main() -> int:
    # seconds between retries of a refused submission (1, 2, 3 times this); tests shorten it
    retry_wait_s = float(os.environ.get("INTELLIPERF_ACTION_RETRY_WAIT_S") or 1.0)
    return run(os.environ, retry_wait_s=retry_wait_s)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

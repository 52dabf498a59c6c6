"""The Action in a simulated runner: `python -m intelliperf.action` as a subprocess, with the GITHUB_*
variables, the output and summary files and a checked-out workspace, against a live service (real
uvicorn, SQLite, the filesystem broker) and a real Celery worker that diagnoses a recorded profile.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from service.settings import ServiceSettings
from tests.action.test_inputs import parse_outputs
from tests.service.conftest import (
    ADMIN,
    ROOT,
    WORKER_TOKEN,
    LiveService,
    celery_worker,
    free_port,
    serve,
    wait_for,
)

SECRET_KEY = "action-test-secret-key-0123456789"
LLM_KEY = "sk-live-" + uuid.uuid4().hex
ACTIONS_TOKEN = "ghp_" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveService]:
    """One service and one worker for the module: each test's jobs are its own (run ids differ)."""
    base = tmp_path_factory.mktemp("stack")
    settings = ServiceSettings(
        data_dir=base / "data",
        database_url=f"sqlite:///{base / 'intelliperf.db'}",
        admin_token=ADMIN,  # type: ignore[arg-type]
        secret_key=SECRET_KEY,  # type: ignore[arg-type]
        worker_token=WORKER_TOKEN,  # type: ignore[arg-type]
        heartbeat_s=0.5,
        worker_stale_s=3.0,
        dispatch_sweep_s=0.5,
        events_poll_s=0.05,
    )
    with (
        serve(settings) as live,
        celery_worker(settings, "w-action", base / "worker.log"),
    ):
        yield live


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A checked-out repository: the example project with its recorded profile, and ignored junk."""
    ws = tmp_path / "workspace"
    project = ws / "kernels"
    shutil.copytree(ROOT / "examples" / "transpose_bank", project, ignore=shutil.ignore_patterns("bin"))
    shutil.copytree(ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank" / "original", project / "profile")
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "huge.log").write_bytes(b"x" * 1000)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    return ws


@dataclass
class Step:
    returncode: int
    log: str
    outputs: dict[str, str]
    summary: str


def run_action(
    ws: Path, service_url: str, timeout: float = 120, github: dict[str, str] | None = None, **inputs: str
) -> Step:
    runner = ws.parent / "runner"
    runner.mkdir(exist_ok=True)
    output, summary = runner / f"output-{uuid.uuid4().hex}", runner / f"summary-{uuid.uuid4().hex}"
    output.touch()
    summary.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "INTELLIPERF_"))}
    env |= {
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(ws),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_REPOSITORY": "octo/kernels",
        "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
        "GITHUB_REF_NAME": "main",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_RUN_ID": str(uuid.uuid4().int % 10**9),
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "intelliperf",
        "GITHUB_ACTION": "__intelliperf",
        "INTELLIPERF_ACTION_RETRY_WAIT_S": "0.1",
        "PYTHONPATH": str(ROOT),
    } | (github or {})
    values = {
        "service_url": service_url,
        "service_token": ADMIN,
        "project_directory": "kernels",
        "applications": '[{"command": "./bin/transpose", "name": "transpose"}]',
        "formula": "diagnoseOnly",
        "spec": '{"replay": "profile"}',
        "timeout_minutes": "2",
    } | inputs
    env |= {f"INPUT_{name.upper()}": value for name, value in values.items()}
    result = subprocess.run(
        [sys.executable, "-m", "intelliperf.action"],
        env=env,
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Step(
        result.returncode,
        result.stdout + result.stderr,
        parse_outputs(output.read_text()),
        summary.read_text(),
    )


def lines(log: str, prefix: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith(prefix)]


def test_a_job_runs_and_reports_into_the_runner(stack: LiveService, workspace: Path) -> None:
    step = run_action(
        workspace,
        stack.url,
        llm_gateway_key=LLM_KEY,
        intelliperf_actions_token=ACTIONS_TOKEN,
        fail_on="error",
    )
    assert step.returncode == 0, step.log
    # secrets: masked before anything else is printed, and nowhere else in the log
    masks = lines(step.log, "::add-mask::")
    assert sorted(masks) == sorted(f"::add-mask::{s}" for s in (LLM_KEY, ACTIONS_TOKEN, ADMIN))
    assert step.log.splitlines()[:3] == masks
    unmasked = "\n".join(line for line in step.log.splitlines() if not line.startswith("::add-mask::"))
    for secret in (LLM_KEY, ACTIONS_TOKEN, ADMIN):
        assert secret not in unmasked
    # the events, folded into a group
    job_id = step.outputs["job_id"]
    assert f"::group::IntelliPerf job {job_id}: events" in step.log
    assert len(lines(step.log, "::group::")) == len(lines(step.log, "::endgroup::")) == 2
    events = step.log.split(f"::group::IntelliPerf job {job_id}: events")[1].split("::endgroup::")[0]
    assert "[timing]" in events and "[diagnose]" in events
    assert "respecting .gitignore" in step.log
    # outputs
    assert step.outputs["status"] == "succeeded"
    assert step.outputs["outcome"] == "diagnosed"
    assert step.outputs["speedup"] == "" and step.outputs["pr_url"] == "" and step.outputs["diff"] == ""
    report_path = Path(step.outputs["report"])
    assert report_path == workspace / "intelliperf-report.json"
    report = json.loads(report_path.read_text())
    present = [d["formula"] for d in report["diagnoses"] if d["present"]]
    assert present == ["bankConflict"]
    # the step summary: the report rendered as Markdown, and the job's line
    assert step.summary.startswith("#")
    assert "bank" in step.summary.lower() and "transpose" in step.summary
    assert f"IntelliPerf job `{job_id}` on {stack.url}: **succeeded** (diagnosed)" in step.summary
    # the job on the service: the archive left the ignored file out, the secrets went as headers
    with stack.client() as client:
        job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["source"] == "archive" and job["spec"]["replay"] == "profile"
    assert job["repository"] == "octo/kernels"
    assert job["spec"]["repository"]["commit"] == "0123456789abcdef0123456789abcdef01234567"
    assert LLM_KEY not in json.dumps(job) and ACTIONS_TOKEN not in json.dumps(job)


def test_a_retried_step_finds_its_job(stack: LiveService, workspace: Path) -> None:
    first = run_action(workspace, stack.url, idempotency_key=f"retry-{uuid.uuid4().hex}")
    second = run_action(workspace, stack.url, idempotency_key=lines(first.log, "Idempotency-Key: ")[0][17:])
    assert first.returncode == second.returncode == 0, first.log + second.log
    assert first.outputs["job_id"] == second.outputs["job_id"]
    assert "already submitted by an earlier try" in second.log


@pytest.mark.parametrize(("fail_on", "code"), [("error", 1), ("no-speedup", 1), ("never", 0)])
def test_a_failing_job_fails_the_step_by_fail_on(
    stack: LiveService, workspace: Path, fail_on: str, code: int
) -> None:
    step = run_action(
        workspace, stack.url, build_command="echo 'error: no rule to make bin' >&2; exit 3", fail_on=fail_on
    )
    assert step.returncode == code, step.log
    assert step.outputs["status"] == "failed"
    assert step.outputs["report"] == ""
    failure = f"IntelliPerf job {step.outputs['job_id']} failed"
    assert lines(step.log, "::error::" if code else "::warning::")[0].startswith(
        f"::{'error' if code else 'warning'}::{failure}"
    )
    assert "**failed**" in step.summary and "no rule to make bin" in step.summary


def test_no_speedup_fails_a_diagnosis_only_when_asked(stack: LiveService, workspace: Path) -> None:
    strict = run_action(workspace, stack.url, fail_on="no-speedup")
    assert strict.returncode == 1, strict.log
    assert strict.outputs["status"] == "succeeded"
    assert "found no validated speedup" in lines(strict.log, "::error::")[0]


def test_wait_false_returns_once_queued(stack: LiveService, workspace: Path) -> None:
    step = run_action(workspace, stack.url, wait="false")
    assert step.returncode == 0, step.log
    assert step.outputs["status"] in ("queued", "running")
    assert step.outputs["job_id"] and "::group::IntelliPerf job" not in step.log
    with stack.client() as client:
        wait_for(lambda: client.get(f"/v1/jobs/{step.outputs['job_id']}").json()["status"] == "succeeded")


def test_a_job_past_timeout_minutes_is_cancelled(stack: LiveService, workspace: Path) -> None:
    step = run_action(
        workspace, stack.url, build_command=f"sleep 60.{uuid.uuid4().int % 10**6:06d}", timeout_minutes="0.05"
    )
    assert step.returncode == 4, step.log
    assert "did not finish within timeout_minutes=0.05" in lines(step.log, "::error::")[0]
    job_id = step.outputs["job_id"]
    assert step.outputs["status"] == "cancelled"
    with stack.client() as client:
        state = wait_for(lambda: client.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled", timeout=30)
    assert state


def test_service_down_is_a_clear_error(workspace: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    step = run_action(workspace, url)
    assert step.returncode == 3, step.log
    (error,) = lines(step.log, "::error")
    assert f"cannot reach the service at {url}" in error and "submitting the job" in error
    assert step.outputs == {}


def test_a_refused_token_shows_the_servers_words(stack: LiveService, workspace: Path) -> None:
    step = run_action(workspace, stack.url, service_token="not-a-token")
    assert step.returncode == 3, step.log
    (error,) = lines(step.log, "::error")
    assert "HTTP 401" in error and "service_token" in error
    assert "::add-mask::not-a-token" in step.log


def test_a_spec_the_service_refuses_shows_its_reason(stack: LiveService, workspace: Path) -> None:
    """source git, from a repository whose name the service cannot read: its 422, naming the field."""
    step = run_action(workspace, stack.url, source="git", github={"GITHUB_REPOSITORY": "octo/bad name"})
    assert step.returncode == 3, step.log
    (error,) = lines(step.log, "::error")
    assert "HTTP 422 (the service refused the job)" in error
    assert "repository.url: cannot tell owner/name from this URL" in error
    assert "packed" not in step.log  # source git: nothing uploaded


def test_a_vendor_no_worker_serves_is_refused_with_the_reason(stack: LiveService, workspace: Path) -> None:
    """The stack's one worker consumes gpu.nvidia.any: an AMD job would wait forever, so it is refused."""
    step = run_action(workspace, stack.url, gpu_vendor="amd")
    assert step.returncode == 3, step.log
    (error,) = lines(step.log, "::error")
    assert "HTTP 422 (the service refused the job)" in error
    assert "no worker serves the GPU queue gpu.amd.any" in error and "serve gpu.nvidia.any" in error


def test_bad_input_is_named_before_anything_is_sent(workspace: Path) -> None:
    step = run_action(
        workspace, "http://127.0.0.1:9", applications='[{"command": "./bin/transpose", "top_n": "many"}]'
    )
    assert step.returncode == 2, step.log
    (error,) = lines(step.log, "::error")
    assert error.startswith(
        "::error title=IntelliPerf%3A input applications::input 'applications': applications[0].top_n"
    )


def test_each_application_runs_as_its_own_job_with_its_own_formula(
    stack: LiveService, workspace: Path
) -> None:
    """Two applications: two jobs on the real service and worker, each with its overrides, reported one by one
    in the log, the outputs and the step summary."""
    applications = [
        {"command": "./bin/transpose", "name": "transpose", "formula": "bankConflict"},
        {"command": "./bin/transpose", "name": "strided view", "formula": "memoryAccess", "top_n": 3},
    ]
    step = run_action(workspace, stack.url, applications=json.dumps(applications), formula="diagnoseOnly")
    assert step.returncode == 0, step.log
    rows = json.loads(step.outputs["jobs"])
    assert [row["application"] for row in rows] == ["transpose", "strided view"]
    assert step.outputs["job_id"] == " ".join(row["job_id"] for row in rows)
    assert len({row["job_id"] for row in rows}) == 2 and step.outputs["status"] == "succeeded"
    with stack.client() as client:
        specs = [client.get(f"/v1/jobs/{row['job_id']}").json()["spec"] for row in rows]
    assert [s["formula"] for s in specs] == ["bankConflict", "memoryAccess"]
    assert [s["top_n"] for s in specs] == [10, 3]
    assert [len(s["applications"]) for s in specs] == [1, 1]
    reports = [json.loads(Path(row["report"]).read_text()) for row in rows]
    assert Path(rows[0]["report"]).name == "intelliperf-report-1-transpose.json"
    assert Path(rows[1]["report"]).name == "intelliperf-report-2-strided_view.json"
    present = [[d["formula"] for d in r["diagnoses"] if d["present"]] for r in reports]
    assert present == [["bankConflict"], []]  # each job ran only its own formula
    assert {d["formula"] for d in reports[1]["diagnoses"]} == {"memoryAccess"}
    for row, name in zip(rows, ("transpose", "strided view"), strict=True):
        assert f"::group::IntelliPerf job {row['job_id']} ({name}): events" in step.log
        assert f"job {row['job_id']} submitted for {name}" in step.log
    assert "## transpose" in step.summary and "## strided view" in step.summary

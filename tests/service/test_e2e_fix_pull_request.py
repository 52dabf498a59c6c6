"""Issue 43's answer to a regression, end to end on the CPU machine: tracking jobs on main whose kernel got
slower from one commit (their reports finished as the worker API finishes them) queue one fix job; a real
Celery worker process runs it (real nvcc build, the DSPy client against a scripted OpenAI-compatible server
on 127.0.0.1, the GPU's recorded verdicts), and the pull request it opens on a GitHub REST server on
127.0.0.1 targets main and opens with the commit that made the kernel slower."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from benchmarks.loop_scenarios import fixed_source, known_fix
from intelliperf.contract import Application, JobSpec, RepositoryRef, TrackSettings
from service.auth import ADMIN
from service.db.models import Job
from service.db.session import Database
from service.job_end import finish
from service.jobs import submit
from service.secrets import SecretBox, store_secrets
from service.settings import ServiceSettings
from tests.service.conftest import celery_worker, serve, upgrade, wait_for
from tests.service.test_e2e_pull_request import project_with_recording
from tests.service.test_kernel_series import TRANSPOSE, report
from tests.support.fake_github import FakeGitHub
from tests.support.scripted_llm import ScriptedLLM

LLM_KEY = "sk-e2e-fix-llm-key-0123456789abcdef"
GITHUB_TOKEN = "ghp_e2e_fix_token_0123456789abcdefgh"
SECRET_KEY = "e2e-fix-service-key"
FAST_NS, SLOW_NS, COMMITS, SLOWER_FROM = 47_700.0, 81_000.0, 12, 6

pytestmark = pytest.mark.skipif(
    shutil.which("nvcc") is None, reason="the fix job rebuilds the kernel with nvcc"
)


def tracking_spec(host: str, commit: str, api_base: str) -> JobSpec:
    """What the Action's `mode: track` submits on a push to main (a recorded profile for the GPU)."""
    return JobSpec(
        repository=RepositoryRef(url=f"https://{host}/acme/kernels.git", ref="main", commit=commit),
        applications=[Application(command=["./bin/transpose", "20"])],
        build_command="make bin/transpose",
        formula="diagnoseOnly",
        replay="profile",
        num_attempts=2,
        llm={"model": "scripted", "api_base": api_base, "max_retries": 0},
        pull_request={"labels": ["intelliperf"]},
        track=TrackSettings(),
    )


def tracked_pushes(settings: ServiceSettings, specs: list[JobSpec], archive: bytes) -> list[Job]:
    """Each push's tracking job submitted with its secrets and finished with a report whose kernel is
    slower from push SLOWER_FROM on, as the worker API finishes one; the fix jobs that queued."""
    upgrade(settings.resolved_database_url)
    database = Database(settings.resolved_database_url)
    box = SecretBox(SecretStr(SECRET_KEY))
    try:
        for number, spec in enumerate(specs):
            with database.session() as session:
                job, _ = submit(session, spec, principal=ADMIN, repository="acme/kernels", archive=archive)
                store_secrets(session, job.id, {"llm_key": LLM_KEY, "github_token": GITHUB_TOKEN}, box)
            level = SLOW_NS if number >= SLOWER_FROM else FAST_NS
            with database.session() as session:
                finish(session, job.id, status="succeeded", outcome="diagnosed", report=report(level))
        with database.session() as session:
            return [j for j in session.scalars(select(Job)) if j.spec["pull_request"].get("note")]
    finally:
        database.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_regression_on_main_is_answered_by_a_pull_request_naming_its_commit(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    source, original, _ = fixed_source("transpose_bank")
    github = FakeGitHub(token=GITHUB_TOKEN)
    settings = settings_for(database_url, secret_key=SECRET_KEY, github_hosts=[github.host])
    with github, ScriptedLLM([known_fix("transpose_bank")], key=LLM_KEY) as llm:
        repo = github.add_repository("acme/kernels", {source: original, "Makefile": "all:\n"})
        commits = [
            repo.commit_files({"CHANGES": f"{n}\n"}, f"push {n}", branch="main") for n in range(COMMITS)
        ]
        specs = [tracking_spec(github.host, commit, llm.api_base) for commit in commits]
        (fix,) = tracked_pushes(settings, specs, project_with_recording())
        assert (fix.status, fix.spec["kernel"], fix.spec["formula"]) == ("queued", f"^{TRANSPOSE}$", "auto")
        with (
            serve(settings) as live,
            celery_worker(settings, "w-fix", tmp_path / "worker.log", extra_env=github.worker_env),
            live.client() as client,
        ):

            def finished() -> dict | None:
                job = client.get(f"/v1/jobs/{fix.id}").json()
                return job if job["status"] in ("succeeded", "failed", "cancelled") else None

            job = wait_for(finished, timeout=300, interval=0.5)
    assert isinstance(job, dict) and (job["status"], job["outcome"]) == ("succeeded", "success"), job
    [pull] = github.pulls("acme/kernels")
    assert job["pr_url"] == pull["html_url"] and pull["base"]["ref"] == "main"
    body = pull["body"]
    assert body.startswith("IntelliPerf's tracking found `transpose_tiled")
    assert f"from commit {commits[SLOWER_FROM]} on `main`" in body
    assert "this pull request proposes a fix" in body and f"{job['speedup']:.2f}x" in body
    assert LLM_KEY not in body and GITHUB_TOKEN not in body

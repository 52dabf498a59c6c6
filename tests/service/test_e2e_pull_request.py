"""Issue 6's end-to-end proof on the CPU machine: a job submitted through the API with its secrets, a real
Celery worker process, the engine in a subprocess (real nvcc builds, the real DSPy client against a scripted
OpenAI-compatible server on 127.0.0.1, the GPU's recorded verdicts and counters for the candidates), events
streamed, and the result and the pull request landed on a GitHub REST server on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from benchmarks.loop_scenarios import fixed_source, known_fix
from service.db.models import JobEvent, JobSecret
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import ROOT, celery_worker, project_archive, serve
from tests.support.fake_github import FakeGitHub
from tests.support.scripted_llm import ScriptedLLM

LLM_KEY = "sk-e2e-llm-key-0123456789abcdef"
GITHUB_TOKEN = "ghp_e2e_token_0123456789abcdefghij"
SECRET_KEY = "e2e-service-key"
EXAMPLE = ROOT / "examples" / "transpose_bank"
RECORDED = ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank"

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="the loop rebuilds the kernel with nvcc")


def project_with_recording() -> bytes:
    """The example as a user uploads it, plus the GPU machine's recording of the same loop under profile/."""
    files: dict[str, str | bytes] = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
    for variant in ("original", "fixed"):
        for path in (RECORDED / variant).iterdir():
            files[f"profile/{variant}/{path.name}"] = path.read_bytes()
    files["profile/loop-report.json"] = (ROOT / "tests" / "fixtures" / "loop" / "report.json").read_bytes()
    return project_archive(files)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_job_goes_from_the_api_through_a_worker_to_a_pull_request(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    source, original, fixed = fixed_source("transpose_bank")
    github = FakeGitHub(token=GITHUB_TOKEN)
    # the project comes as an archive: the repository's URL names the pull request's owner/name, on a host
    # the service and the worker are configured for (only https URLs of such hosts are accepted)
    host = github.host
    settings = settings_for(database_url, secret_key=SECRET_KEY, github_hosts=[host])
    with (
        github,
        ScriptedLLM([known_fix("transpose_bank")], key=LLM_KEY) as llm,
        serve(settings) as live,
    ):
        repo = github.add_repository("acme/kernels", {source: original, "Makefile": "all:\n"})
        base = repo.refs["refs/heads/main"]
        spec = {
            "repository": {"url": f"https://{host}/acme/kernels.git", "commit": base},
            "applications": [{"command": "./bin/transpose 20"}],
            "build_command": "make bin/transpose",
            "formula": "bankConflict",
            "num_attempts": 2,
            "replay": "profile",
            "llm": {"model": "scripted", "api_base": llm.api_base, "max_retries": 0},
            "pull_request": {"create_pr": True, "labels": ["intelliperf", "performance"]},
        }
        log = tmp_path / "worker.log"  # no LLM key in the worker's settings: the service keeps it
        with celery_worker(settings, "w-e2e", log, extra_env=github.worker_env), live.client() as client:
            response = client.post(
                "/v1/jobs",
                data={"spec": json.dumps(spec)},
                files={"archive": ("project.tar.gz", project_with_recording(), "application/gzip")},
                headers={"X-IntelliPerf-LLM-Key": LLM_KEY, "X-IntelliPerf-GitHub-Token": GITHUB_TOKEN},
            )
            assert response.status_code == 201, response.text
            job_id = response.json()["id"]
            streamed = client.get(f"/v1/jobs/{job_id}/events", timeout=300).text  # follows until the end
            job = client.get(f"/v1/jobs/{job_id}").json()
            diff = client.get(f"/v1/jobs/{job_id}/diff").text
            report = client.get(f"/v1/jobs/{job_id}/report").json()

        assert (job["status"], job["outcome"]) == ("succeeded", "success"), job["error"]
        assert job["speedup"] == pytest.approx(report["best"]["speedup"]["median"]) and job["speedup"] > 1.5
        assert "+    __shared__ float tile[kTile][kTile + 1];" in diff
        assert len(llm.requests) == 1  # the model was asked once and its edit was the fix
        for stage in ("running", "build", "timing", "counters", "diagnose", "pull_request", "succeeded"):
            assert f'"stage": "{stage}"' in streamed
        [pull] = github.pulls("acme/kernels")
        assert job["pr_url"] == pull["html_url"]
        assert pull["title"].startswith("[IntelliPerf] transpose_tiled: ") and pull["title"].endswith(
            "x faster"
        )
        assert {label["name"] for label in pull["labels"]} == {"intelliperf", "performance"}
        head = pull["head"]["sha"]
        assert repo.files_at(head)[source].decode() == fixed  # the commit holds the rewrite
        assert repo.files_at(base)[source].decode() == original
        assert f"{job['speedup']:.2f}x" in pull["body"]
        assert f"{job['speedup']:.2f}x" in job["summary"]  # the Markdown summary, served with the job

    database = Database(settings.resolved_database_url)
    with database.session() as session:
        assert session.scalars(select(JobSecret)).all() == []
        messages = "\n".join(session.scalars(select(JobEvent.message)))
    database.dispose()
    bodies = "\n".join(str(r.body) for r in github.requests)
    for text in (messages, streamed, log.read_text(), bodies, pull["body"], json.dumps(report)):
        assert LLM_KEY not in text and GITHUB_TOKEN not in text

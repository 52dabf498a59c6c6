"""Issue 6 on the GPU machine: a real Celery worker runs a real example job on the GPU (build, CUPTI timing,
Nsight Compute, the loop with its model a scripted server on 127.0.0.1, Accordo, the rewrite's speedup) and
opens the pull request on a GitHub REST server on 127.0.0.1. The service, the broker (filesystem) and the
database (SQLite) run beside it. With INTELLIPERF_TEST_ARTIFACTS set, the report and the pull request's
payload are written there."""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from sqlalchemy import select

from accordo.reproducer import REPRODUCER_FILES
from benchmarks.loop_scenarios import fixed_source, known_fix
from service.db.models import CounterEntry
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import ROOT, WORKER_TOKEN, celery_worker, project_archive, serve
from tests.support.fake_github import FakeGitHub
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.gpu

LLM_KEY = "sk-gpu-worker-test-0123456789"
GITHUB_TOKEN = "ghp_gpu_worker_test_0123456789abcd"
SECRET_KEY = "gpu-worker-test-secret-key"
EXAMPLE = ROOT / "examples" / "transpose_bank"
ARTIFACTS = os.environ.get("INTELLIPERF_TEST_ARTIFACTS")  # read before the tests clear INTELLIPERF_*


def test_a_worker_runs_a_job_on_the_gpu_and_opens_the_pull_request(tmp_path: Path) -> None:
    settings = ServiceSettings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'jobs.db'}",
        admin_token="gpu-admin",
        secret_key=SECRET_KEY,
        worker_token=WORKER_TOKEN,
        heartbeat_s=1.0,
        events_poll_s=0.1,
    )
    source, original, fixed = fixed_source("transpose_bank")
    files: dict[str, str | bytes] = {p.name: p.read_bytes() for p in EXAMPLE.iterdir() if p.is_file()}
    with (
        FakeGitHub(token=GITHUB_TOKEN) as github,
        ScriptedLLM([known_fix("transpose_bank")], key=LLM_KEY) as llm,
        serve(settings) as live,
    ):
        repo = github.add_repository("acme/kernels", {source: original, "Makefile": files["Makefile"]})
        base = repo.refs["refs/heads/main"]
        spec = {
            # the project comes as an archive; the URL names the pull request's owner/name on a host the
            # service takes (INTELLIPERF_GITHUB_HOSTS: github.com), and the worker opens it on the fake API
            "repository": {"url": "https://github.com/acme/kernels.git", "commit": base},
            "applications": [{"command": "./bin/transpose 20"}],
            "build_command": "make bin/transpose",
            "formula": "bankConflict",
            "num_attempts": 2,
            "llm": {"model": "scripted", "api_base": llm.api_base, "max_retries": 0},
            "pull_request": {"create_pr": True},
        }
        worker_env = {"INTELLIPERF_GITHUB_API_URL": github.api_url}  # no key: the service keeps it
        with (
            celery_worker(settings, "gpu-worker", tmp_path / "worker.log", extra_env=worker_env),
            live.client(token="gpu-admin") as client,
        ):
            response = client.post(
                "/v1/jobs",
                data={"spec": json.dumps(spec)},
                files={"archive": ("project.tar.gz", project_archive(files), "application/gzip")},
                headers={"X-IntelliPerf-LLM-Key": LLM_KEY, "X-IntelliPerf-GitHub-Token": GITHUB_TOKEN},
            )
            assert response.status_code == 201, response.text
            job_id = response.json()["id"]
            events = client.get(f"/v1/jobs/{job_id}/events", timeout=900).text
            job = client.get(f"/v1/jobs/{job_id}").json()
            report = client.get(f"/v1/jobs/{job_id}/report").json()
            kept = client.get(f"/v1/jobs/{job_id}/reproducer")
        [pull] = github.pulls("acme/kernels")
        head_source = repo.files_at(pull["head"]["sha"])[source].decode()
        reproducer_ref = repo.refs.get(f"refs/heads/{pull['head']['ref']}-reproducer")
        reproducer_files = set(repo.files_at(reproducer_ref)) if reproducer_ref else set()
    if ARTIFACTS:
        folder = Path(ARTIFACTS)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "worker_job_report.json").write_text(json.dumps(report, indent=2))
        payload = {k: pull[k] for k in ("title", "body", "html_url")} | {"head": pull["head"]["ref"]}
        (folder / "worker_pull_request.json").write_text(
            json.dumps(payload | {"files": {source: head_source}})
        )
        (folder / "worker_events.txt").write_text(events)
    assert (job["status"], job["outcome"]) == ("succeeded", "success"), job["error"]
    assert report["device"]["vendor"] == "nvidia" and report["best"]["speedup"]["verdict"] == "faster"
    assert job["speedup"] > 1.2 and job["pr_url"] == pull["html_url"]
    assert head_source == fixed and pull["title"].startswith("[IntelliPerf] transpose_tiled: ")
    assert f"{job['speedup']:.2f}x" in pull["body"]
    # the body says where the reproducer is, or why none is attached (transpose's two 64 MiB matrices per
    # capture, 256 MiB in all, are over what a pull request carries)
    assert "### Reproducer" in pull["body"], pull["body"]
    assert (reproducer_ref is None) == ("Not attached:" in pull["body"])
    if reproducer_ref is not None:
        names = {
            f".intelliperf/reproducer/{n}" for n in ("reference.bin", "candidate.bin", "reproducer.json")
        }
        assert names <= reproducer_files
    # the service keeps it whatever its size, and the body says where
    assert kept.status_code == 200, kept.text
    with tarfile.open(fileobj=io.BytesIO(kept.content)) as archive:
        assert {f"reproducer/{n}" for n in REPRODUCER_FILES} == set(archive.getnames())
    assert f"/v1/jobs/{job_id}/reproducer" in pull["body"]
    for stage in ("build", "timing", "counters", "diagnose", "reproducer", "pull_request"):
        assert f'"stage": "{stage}"' in events
    for text in (events, pull["body"], json.dumps(report), (tmp_path / "worker.log").read_text()):
        assert LLM_KEY not in text and GITHUB_TOKEN not in text


def test_a_tracked_push_reuses_the_counters_an_earlier_push_of_the_same_code_kept(tmp_path: Path) -> None:
    """Two pushes of unchanged code to the tracked base branch, each cloned by a real worker (only a job the
    worker cloned from the branch publishes: JobSpec.publishes_counters): the first pays the counter pass and
    its counters are kept by the service, for the repository; the second is diagnosed from them without a
    counter pass, alike. git's own url.<base>.insteadOf, in the worker's environment, points the
    repository's https URL at a bare repository in tmp_path (nothing leaves the machine)."""
    settings = ServiceSettings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'jobs.db'}",
        admin_token="gpu-admin",
        worker_token=WORKER_TOKEN,
        heartbeat_s=1.0,
        events_poll_s=0.1,
    )
    url = "https://github.com/acme/kernels.git"
    bare = pushed_repository(tmp_path / "pushes", EXAMPLE)
    git_env = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{bare.as_uri()}.insteadOf"}
    git_env["GIT_CONFIG_VALUE_0"] = url
    spec = {
        "repository": {"url": url, "ref": "main"},
        "applications": [{"command": "./bin/transpose 20"}],
        "build_command": "make bin/transpose",
        "formula": "diagnoseOnly",
        "top_n": 1,
        "track": {"base_branch": "main"},
    }
    reports, events = [], []
    with (
        serve(settings) as live,
        celery_worker(settings, "gpu-worker", tmp_path / "worker.log", extra_env=git_env),
        live.client(token="gpu-admin") as client,
    ):
        for _push in range(2):
            response = client.post("/v1/jobs", json=spec)
            assert response.status_code == 201, response.text
            assert response.json()["source"] == "git", response.json()
            job_id = response.json()["id"]
            events.append(client.get(f"/v1/jobs/{job_id}/events", timeout=600).text)
            job = client.get(f"/v1/jobs/{job_id}").json()
            assert job["status"] == "succeeded", (job["error"], events[-1])
            reports.append(client.get(f"/v1/jobs/{job_id}/report").json())
    first, second = reports
    (kernel,) = [k for k in first["kernels"] if k["name"] == "_Z15transpose_tiledPKfPfii"]
    assert kernel["code_hash"] is not None and kernel["shape_hash"] is not None
    assert first["passes"]["counters_s"] > 0 and first["reused_counters"] == []
    assert "counters of 1 kernel(s) kept for later pushes to reuse" in events[0]
    assert second["passes"]["counters_s"] is None and '"stage": "counters"' not in events[1]
    (reused,) = second["reused_counters"]
    assert (reused["kernel"], reused["code_hash"]) == (kernel["name"], kernel["code_hash"])
    assert reused["saved_s"] == pytest.approx(first["passes"]["counters_s"], abs=0.01)
    assert second["diagnoses"] == first["diagnoses"]
    database = Database(settings.resolved_database_url)
    with database.session() as session:  # one entry, the repository's
        assert session.execute(select(CounterEntry.repository)).scalars().all() == ["acme/kernels"]
    database.dispose()


def pushed_repository(folder: Path, project: Path) -> Path:
    """A bare repository whose main branch holds ``project``'s files, as a push to it would."""
    work, bare = folder / "work", folder / "kernels.git"
    work.mkdir(parents=True)
    for path in project.iterdir():
        if path.is_file():
            (work / path.name).write_bytes(path.read_bytes())
    identity = ["-c", "user.name=IntelliPerf test", "-c", "user.email=test@intelliperf.invalid"]
    for argv in (["init", "-q", "-b", "main"], ["add", "-A"], [*identity, "commit", "-q", "-m", "push"]):
        subprocess.run(["git", *argv], cwd=work, check=True, capture_output=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True, capture_output=True)
    return bare

"""`intelliperf submit` against a real local stack (the API in this process, a real Celery worker): the
project packed, the job followed live, the table printed, the report written, the job's exit code; the
token from an option, the environment or the config file; a service away or a refusal is exit 13."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.conftest import ADMIN, ROOT, LiveService, celery_worker

RECORDING = ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank" / "original"
DIAGNOSE = ["-p", "examples/transpose_bank", "-f", "diagnoseOnly", "--replay", str(RECORDING)]


def intelliperf(
    *args: str, env: dict[str, str] | None = None, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    return subprocess.run(
        [sys.executable, "-m", "intelliperf", *args],
        cwd=ROOT,
        env=base | (env or {}),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def worked(live: LiveService, tmp_path: Path) -> Iterator[LiveService]:
    with celery_worker(live.settings, "w-submit", tmp_path / "worker.log"):
        yield live


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_job_is_submitted_followed_and_reported(worked: LiveService, tmp_path: Path) -> None:
    report_file = tmp_path / "report.json"
    done = intelliperf(
        "submit", *DIAGNOSE, "-o", str(report_file), "--", "./bin/transpose",
        env={"INTELLIPERF_SERVICE_URL": worked.url, "INTELLIPERF_TOKEN": ADMIN},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    # followed live: the queue, the worker, the engine's stages, the end
    assert "job " in done.stderr and "submitted to" in done.stderr
    for line in (
        "== queued on gpu.nvidia.any",
        "== started on w-submit",
        "[timing]",
        "== succeeded: diagnosed",
    ):
        assert line in done.stderr, done.stderr
    assert "transpose_tiled" in done.stdout and ": succeeded (diagnosed)" in done.stdout
    report = json.loads(report_file.read_text())
    [selected] = [d for d in report["diagnoses"] if d["present"]]
    assert selected["formula"] == "bankConflict" and "transpose_tiled" in selected["kernel"]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_failed_job_exits_with_the_engine_s_code(worked: LiveService) -> None:
    done = intelliperf(
        "submit", *DIAGNOSE, "-b", "echo broken >&2; exit 1", "--service", worked.url, "--token", ADMIN,
        "--", "./bin/transpose",
    )  # fmt: skip
    assert done.returncode == 5, done.stderr  # build_failed, as `intelliperf run` exits
    assert "failed (build_failed)" in done.stdout and "broken" in done.stderr


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_no_follow_prints_the_job_and_the_token_may_come_from_the_config_file(
    live: LiveService, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[service]\nurl = "{live.url}"\ntoken = "{ADMIN}"\n')
    done = intelliperf(
        "submit", *DIAGNOSE, "--no-follow", "--", "./bin/transpose", env={"INTELLIPERF_CONFIG": str(config)}
    )
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    with live.client() as client:
        job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["status"] == "queued" and job["spec"]["replay"] == ".intelliperf-replay"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_refusals_and_a_missing_service_have_their_own_exit_codes(live: LiveService, tmp_path: Path) -> None:
    no_token = intelliperf("submit", *DIAGNOSE, "--service", live.url, "--", "./bin/transpose",
                           env={"INTELLIPERF_CONFIG": str(tmp_path / "none.toml")})  # fmt: skip
    assert no_token.returncode == 2 and "INTELLIPERF_TOKEN" in no_token.stderr
    wrong = intelliperf(
        "submit", *DIAGNOSE, "--service", live.url, "--token", "ipt_wrong", "--", "./bin/transpose"
    )
    assert wrong.returncode == 13 and "HTTP 401" in wrong.stderr
    away = intelliperf(
        "submit", *DIAGNOSE, "--service", "http://127.0.0.1:9", "--token", ADMIN, "--", "./bin/x"
    )
    assert away.returncode == 13 and "cannot reach the service" in away.stderr
    missing = intelliperf("submit", "-p", "examples/transpose_bank", "--replay", str(tmp_path / "nowhere"),
                          "--service", live.url, "--token", ADMIN, "--", "./bin/transpose")  # fmt: skip
    assert missing.returncode == 2 and "no such folder" in missing.stderr


def git(project: Path, *args: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
    }
    subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True, env=os.environ | env)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_track_files_the_kernels_under_the_checkout_and_compares_with_the_base(
    worked: LiveService, tmp_path: Path
) -> None:
    project = tmp_path / "kernels"
    shutil.copytree(ROOT / "examples" / "transpose_bank", project, ignore=shutil.ignore_patterns("bin"))
    git(project, "init", "-q", "-b", "main")
    git(project, "remote", "add", "origin", "git@github.com:acme/kernels.git")  # SSH: filed as https
    git(project, "add", ".")
    git(project, "commit", "-q", "-m", "kernels")
    env = {"INTELLIPERF_SERVICE_URL": worked.url, "INTELLIPERF_TOKEN": ADMIN}
    track = ["submit", "-p", str(project), "--replay", str(RECORDING), "--track", "--", "./bin/transpose"]
    for _ in range(2):  # two commits on main
        done = intelliperf(*track, env=env)
        assert done.returncode == 0, done.stderr
        git(project, "commit", "-q", "--allow-empty", "-m", "next")
    git(project, "checkout", "-q", "-b", "feature")
    done = intelliperf(*track, env=env)
    assert done.returncode == 0, done.stderr
    # the same recording each time: nothing moved, both kernels compared with main's two commits
    assert "No kernel's time moved beyond the noise against the base branch (2 compared)." in done.stdout
    with httpx.Client(base_url=worked.url, headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        jobs = client.get("/v1/jobs", params={"repository": "acme/kernels"}).json()["items"]
        specs = [client.get(f"/v1/jobs/{job['id']}").json()["spec"] for job in jobs]
        series = client.get(
            "/v1/kernels/series",
            params={"repository": "acme/kernels", "kernel": "_Z15transpose_tiledPKfPfii"},
        ).json()
    assert len(jobs) == 3 and {(s["formula"], s["track"]["base_branch"]) for s in specs} == {
        ("diagnoseOnly", "main")
    }
    assert [s["ref"] for s in series["items"]] == ["main", "main", "feature"]
    assert len({s["commit"] for s in series["items"]}) == 3


def test_track_needs_a_git_checkout_with_an_origin(tmp_path: Path) -> None:
    service = ["--service", "http://127.0.0.1:9", "--token", "t"]
    done = intelliperf("submit", "-p", str(tmp_path), "--track", *service, "--", "./bin/app")
    assert done.returncode == 2, done.stderr
    assert "must be in a git checkout with a commit and an 'origin' remote" in done.stderr


@pytest.mark.parametrize(
    ("remote", "url"),
    [
        ("git@github.com:acme/kernels.git", "https://github.com/acme/kernels.git"),
        ("ssh://git@ghe.corp.example:22/acme/kernels.git", "https://ghe.corp.example/acme/kernels.git"),
        ("https://github.com/acme/kernels.git", "https://github.com/acme/kernels.git"),
    ],
)
def test_an_ssh_remote_is_filed_by_its_https_url(remote: str, url: str) -> None:
    from intelliperf.submit import https_clone_url

    assert https_clone_url(remote) == url

"""JobRunner and pull requests: a succeeded job with a rewrite opens (or updates) its pull request on the
fake GitHub, the URL lands in the job's result and events, and a failing PR never loses the result.

The engine is replaced by an executor that returns a report recorded on the GPU; the database is a
real SQLite file migrated with Alembic; the project comes from an uploaded archive.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from sqlalchemy import select

from intelliperf.contract import JobSpec
from service.auth import ADMIN
from service.db.models import Job, JobEvent
from service.db.session import Database
from service.deliveries import new_deliveries
from service.jobs import submit
from service.reproducers import reproducer_path
from service.settings import ServiceSettings
from tests.service.conftest import WORKER_TOKEN, project_archive, serve
from tests.support.fake_github import FakeGitHub
from worker.executor import EngineEvent, ExecutionResult
from worker.heartbeat import Heartbeat
from worker.runner import JobRunner
from worker.service_client import ServiceClient

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "benchmarks" / "results" / "loop" / "transpose_bank" / "report.json"
TOKEN = "ghp_runner_secret_token_0123"
RECORDED = json.loads(REPORT.read_text())


def added_warnings(report: dict[str, object] | None) -> list[str]:
    """The warnings the worker added to the recorded report's own (the GPU run's, kept first)."""
    assert report is not None
    warnings = report["warnings"]
    assert isinstance(warnings, list) and warnings[: len(RECORDED["warnings"])] == RECORDED["warnings"]
    return warnings[len(RECORDED["warnings"]) :]


class RecordedEngine:
    """Stands in for the engine: returns the GPU run's report."""

    def __init__(self, report: dict[str, object]) -> None:
        self.report = report

    def run(
        self,
        spec: JobSpec,
        project: Path,
        out: Path,
        *,
        on_events: Callable[[list[EngineEvent]], None],
        should_cancel: Callable[[], bool],
        time_limit_s: float,
        env: Mapping[str, str] | None = None,
        scratch: Path | None = None,
        counters: Path | None = None,
    ) -> ExecutionResult:
        on_events([EngineEvent("stage", "optimizing", "optimize")])
        return ExecutionResult(0, False, False, None, self.report, "# summary", "")


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    with FakeGitHub(token=TOKEN, enterprise=True) as gh:
        source = (ROOT / "examples" / "transpose_bank" / "transpose.cu").read_text()
        gh.add_repository("acme/kernels", {"examples/transpose_bank/transpose.cu": source})
        yield gh


def queue_job(db: Database, github: FakeGitHub, create_pr: bool = True) -> tuple[str, str]:
    """A queued job and a delivery of it (as the dispatcher makes for its broker message)."""
    commit = github.repositories["acme/kernels"].refs["refs/heads/main"]
    spec = JobSpec.model_validate(
        {
            "repository": {"url": "https://ghe.example.com/acme/kernels.git", "commit": commit},
            "project_directory": "examples/transpose_bank",
            "applications": [{"command": "./bin/transpose 20"}],
            "pull_request": {"create_pr": create_pr, "labels": ["intelliperf"]},
        }
    )
    archive = project_archive({"examples/transpose_bank/transpose.cu": "// the uploaded project\n"})
    with db.session() as session:
        job, _ = submit(session, spec, principal=ADMIN, repository="acme/kernels", archive=archive)
        return job.id, new_deliveries(session, [job.id])[job.id]


def runner(api: ServiceClient, github: FakeGitHub, token: str | None = TOKEN) -> JobRunner:
    report = json.loads(REPORT.read_text())
    return JobRunner(
        api,
        RecordedEngine(report),
        "w-test",
        heartbeat=Heartbeat(api, "w-test", ["gpu.nvidia.any"], None, interval_s=60),
        github_token=lambda _spec: token,
        github_api_url=github.api_url,
        github_retries=0,
        github_throttle=False,
    )


def outcome(db: Database, job_id: str) -> tuple[Job, list[str]]:
    with db.session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        events = session.scalars(
            select(JobEvent.message).where(JobEvent.job_id == job_id).order_by(JobEvent.id)
        )
        return job, list(events)


def test_a_succeeded_job_opens_its_pull_request_and_records_the_url(
    db: Database, api: ServiceClient, github: FakeGitHub
) -> None:
    job_id, delivery = queue_job(db, github)
    assert runner(api, github).run(job_id, delivery) == "succeeded"
    job, events = outcome(db, job_id)
    [pull] = github.pulls("acme/kernels")
    assert job.pr_url == pull["html_url"] == f"{github.root}/acme/kernels/pull/1"
    assert f"pull request opened: {job.pr_url}" in events
    assert pull["head"]["ref"] == f"intelliperf/bankConflict/transpose_tiled-{job_id[:8]}"
    assert [label["name"] for label in pull["labels"]] == ["intelliperf"]
    assert not added_warnings(job.report)
    assert job.speedup == pytest.approx(RECORDED["best"]["speedup"]["median"], abs=1e-4)

    second, delivery = queue_job(db, github)
    runner(api, github).run(second, delivery)
    job2, events2 = outcome(db, second)
    assert job2.pr_url == job.pr_url and len(github.pulls("acme/kernels")) == 1
    assert f"pull request updated: {job.pr_url}" in events2


@pytest.mark.parametrize("token", [TOKEN, None], ids=["github-refuses", "no-token"])
def test_a_failed_pull_request_keeps_the_result_with_a_warning(
    db: Database, api: ServiceClient, github: FakeGitHub, token: str | None
) -> None:
    github.fail(422, "POST", r"/pulls$", "Validation Failed")
    job_id, delivery = queue_job(db, github)
    assert runner(api, github, token).run(job_id, delivery) == "succeeded"
    job, events = outcome(db, job_id)
    assert (job.status, job.outcome, job.pr_url, job.error) == ("succeeded", "success", None, None)
    assert job.report is not None and job.report["best"] is not None and job.diff
    [warning] = added_warnings(job.report)
    failures = [e for e in events if e.startswith("pull request failed: ")]
    assert failures == [warning]
    expected = "GitHub answered 422 while opening the pull request" if token else "no GitHub token"
    assert expected in warning
    assert TOKEN not in json.dumps(job.report) and all(TOKEN not in e for e in events)


def test_no_pull_request_unless_asked(db: Database, api: ServiceClient, github: FakeGitHub) -> None:
    job_id, delivery = queue_job(db, github, create_pr=False)
    assert runner(api, github).run(job_id, delivery) == "succeeded"
    job, events = outcome(db, job_id)
    assert job.pr_url is None and not github.requests
    assert not any("pull request" in e for e in events)


class EngineWithReproducer(RecordedEngine):
    """The recorded engine, leaving a reproducer in the job's outputs as engine_main does (real capture
    files recorded on the GPU stand in for the timed launch)."""

    def run(self, spec: JobSpec, project: Path, out: Path, **kwargs: object) -> ExecutionResult:  # type: ignore[override]
        folder = out / "reproducer"
        folder.mkdir(parents=True)
        captures = ROOT / "tests" / "fixtures" / "captures" / "block_sum"
        (folder / "reference.bin").write_bytes((captures / "reference-1.bin").read_bytes())
        (folder / "candidate.bin").write_bytes((captures / "fixed_good.bin").read_bytes())
        (folder / "reproducer.json").write_text('{"kernel": "block_sum", "launch": 1}\n')
        return super().run(spec, project, out, **kwargs)  # type: ignore[arg-type]


def test_the_jobs_reproducer_goes_on_a_branch_of_its_own(
    db: Database, api: ServiceClient, github: FakeGitHub
) -> None:
    job_id, delivery = queue_job(db, github)
    job_runner = runner(api, github)
    job_runner.executor = EngineWithReproducer(json.loads(REPORT.read_text()))
    assert job_runner.run(job_id, delivery) == "succeeded"
    [pull] = github.pulls("acme/kernels")
    branch = f"{pull['head']['ref']}-reproducer"
    repo = github.repositories["acme/kernels"]
    files = repo.files_at(repo.refs[f"refs/heads/{branch}"])
    captures = ROOT / "tests" / "fixtures" / "captures" / "block_sum"
    assert files[".intelliperf/reproducer/reference.bin"] == (captures / "reference-1.bin").read_bytes()
    assert ".intelliperf/reproducer/reproducer.json" in files
    assert "examples/transpose_bank/transpose.cu" in files  # on top of the rewrite
    assert f"git fetch origin {branch}" in pull["body"]
    assert "intelliperf replay .intelliperf/reproducer" in pull["body"]


def reproducer_job(db: Database, api: ServiceClient, github: FakeGitHub) -> tuple[str, Job, list[str]]:
    job_id, delivery = queue_job(db, github)
    job_runner = runner(api, github)
    job_runner.executor = EngineWithReproducer(json.loads(REPORT.read_text()))
    assert job_runner.run(job_id, delivery) == "succeeded"
    job, events = outcome(db, job_id)
    return job_id, job, events


def test_the_service_keeps_the_reproducer_and_the_body_names_it(
    db: Database, api: ServiceClient, github: FakeGitHub, settings: ServiceSettings
) -> None:
    job_id, _, events = reproducer_job(db, api, github)
    url = f"{api.http.base_url}/v1/jobs/{job_id}/reproducer"
    [stored] = [e for e in events if e.startswith("reproducer stored")]
    assert stored.endswith(url)
    [pull] = github.pulls("acme/kernels")
    assert f"It is also kept with the job: {url}" in pull["body"]
    with tarfile.open(reproducer_path(settings.data_dir, job_id)) as archive:
        captures = ROOT / "tests" / "fixtures" / "captures" / "block_sum"
        member = archive.extractfile("reproducer/candidate.bin")
        assert member is not None and member.read() == (captures / "fixed_good.bin").read_bytes()


def test_a_reproducer_too_large_to_push_is_linked_from_the_service(
    db: Database, api: ServiceClient, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("worker.pull_request.REPRODUCER_LIMIT", 1024)
    job_id, job, _ = reproducer_job(db, api, github)
    [pull] = github.pulls("acme/kernels")
    assert not any(ref.endswith("-reproducer") for ref in github.repositories["acme/kernels"].refs)
    body = pull["body"]
    assert "Not attached: the reproducer (" in body and "is over the 0 MiB a pull request carries." in body
    url = f"{api.http.base_url}/v1/jobs/{job_id}/reproducer"
    assert f"-o reproducer.tar.gz {url}" in body and "intelliperf replay reproducer" in body
    assert not added_warnings(job.report)


def test_a_reproducer_the_service_refuses_leaves_a_warning_and_the_pull_request(
    db: Database, github: FakeGitHub, settings: ServiceSettings
) -> None:
    small = settings.model_copy(update={"max_reproducer_bytes": 100})
    with serve(small, dispatch=False) as live, ServiceClient(live.url, WORKER_TOKEN, retry_s=5) as api:
        _, job, events = reproducer_job(db, api, github)
    assert job.status == "succeeded" and job.pr_url is not None
    [warning] = added_warnings(job.report)
    assert warning.startswith("storing the reproducer failed:") and "413" in warning
    assert f"{warning}" in events
    [pull] = github.pulls("acme/kernels")
    assert "It is also kept with the job" not in pull["body"] and "-reproducer" in pull["body"]


def test_a_reproducer_that_cannot_be_packed_leaves_a_warning_and_the_result(
    db: Database, api: ServiceClient, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(paths: list[Path], tarball: Path) -> Path:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("worker.runner.pack_reproducer", disk_full)
    _, job, events = reproducer_job(db, api, github)
    assert (job.status, job.outcome) == ("succeeded", "success") and job.pr_url is not None
    [warning] = added_warnings(job.report)
    assert warning == "storing the reproducer failed: [Errno 28] No space left on device"
    assert warning in events

"""The worker's counters between jobs: each repository its own folder, read by its jobs; only a job on the
tracked base branch adds to it, and only entries that hold up (a job is untrusted code).

The runner runs against the real service; the engine is replaced by an executor that leaves in the job's
output what the real engine saved for transpose_bank's recorded profile (tests.support.hashed_replay)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from intelliperf.contract import JobSpec, Report
from intelliperf.engine.counter_store import CounterStore
from service.auth import ADMIN
from service.db.models import JobEvent
from service.db.session import Database
from service.deliveries import new_deliveries
from service.jobs import submit
from tests.recorded import EXAMPLES
from tests.service.conftest import project_archive
from tests.support.hashed_replay import Hashed, diagnosed
from worker.counter_entries import OUTPUT, publish, publishes, repository_folder
from worker.executor import ExecutionResult
from worker.heartbeat import Heartbeat
from worker.runner import JobRunner
from worker.service_client import ServiceClient


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    """An entry the engine saved for transpose_bank (its file) and the report of that run."""
    work = tmp_path_factory.mktemp("saved")
    project = work / "transpose_bank"
    shutil.copytree(EXAMPLES / "transpose_bank", project, ignore=shutil.ignore_patterns("bin"))
    report = diagnosed(
        Hashed({"_Z15transpose_tiledPKfPfii": "00000000000000aa"}), project, CounterStore(None, work / "e")
    )
    (entry,) = (work / "e").glob("*.json")
    return entry, report


def spec(ref: str = "main", repository: str = "acme/kernels", track: bool = True) -> JobSpec:
    return JobSpec.model_validate(
        {
            "repository": {"url": f"https://github.com/{repository}.git", "ref": ref},
            "applications": [{"command": "./bin/transpose"}],
            "formula": "diagnoseOnly",
            **({"track": {"base_branch": "main"}} if track else {}),
        }
    )


@pytest.mark.parametrize(
    ("job", "kept"),
    [
        (spec("main"), True),
        (spec("refs/heads/main"), True),
        (spec("feature"), False),
        (spec("main", track=False), False),
        (JobSpec.model_validate({"applications": [{"command": "./a"}], "track": {}}), False),
    ],
    ids=["base branch", "base branch as a ref", "another branch", "not tracked", "no repository"],
)
def test_only_a_job_on_its_tracked_base_branch_adds_counters(job: JobSpec, kept: bool) -> None:
    assert publishes(job) is kept


def test_each_repository_has_a_folder_of_its_own_under_the_root(tmp_path: Path) -> None:
    acme = repository_folder(tmp_path, "acme/kernels")
    assert acme is not None and acme.parent == tmp_path
    assert repository_folder(tmp_path, "ACME/Kernels") == acme  # GitHub's names ignore case
    assert repository_folder(tmp_path, "evil/kernels") != acme
    escape = repository_folder(tmp_path, "../../etc")
    assert escape is not None and escape.parent == tmp_path
    assert repository_folder(tmp_path, None) is None and repository_folder(tmp_path, "") is None


def test_publishing_keeps_entries_that_hold_up_and_says_why_the_others_were_refused(
    tmp_path: Path, saved: tuple[Path, Report]
) -> None:
    entry, _ = saved
    written, folder = tmp_path / "out", tmp_path / "kept"
    written.mkdir()
    shutil.copy(entry, written / entry.name)
    (written / ("0" * 64 + ".json")).write_bytes(entry.read_bytes())  # another key's name
    (written / ("1" * 64 + ".json")).write_text("{ not json")
    (written / "notes.txt").write_text("hello")
    (written / ("2" * 64 + ".json")).symlink_to("/etc/passwd")
    published = publish(written, folder)
    assert published.kept == 1 and [p.name for p in folder.iterdir()] == [entry.name]
    assert (folder / entry.name).read_bytes() == entry.read_bytes()
    reasons = dict(line.split(": ", 1) for line in published.refused)
    assert reasons["0" * 64 + ".json"] == "its key is not the one its name says"
    assert reasons["2" * 64 + ".json"] == "not a plain file"
    assert reasons["notes.txt"] == "not an entry's name"
    assert "validation error" in reasons["1" * 64 + ".json"]
    assert publish(tmp_path / "none", folder).kept == 0
    tampered = json.loads(entry.read_text())
    tampered["profile"]["metrics"] = "all fast"  # under its own key's name, a profile that is none
    (tmp_path / "tampered").mkdir()
    (tmp_path / "tampered" / entry.name).write_text(json.dumps(tampered))
    (refused,) = publish(tmp_path / "tampered", tmp_path / "kept2").refused
    assert refused.startswith(f"{entry.name}: ") and "validation error" in refused
    assert not any((tmp_path / "kept2").iterdir())


class EngineThatSaves:
    """Stands in for the engine: leaves ``files`` in the job's counters output, returns ``report``, and
    keeps the counters folder it was given."""

    def __init__(self, report: Report, files: Callable[[Path], None]) -> None:
        self.report, self.files = report, files
        self.given: list[Path | None] = []

    def run(self, spec: JobSpec, project: Path, out: Path, **kwargs: object) -> ExecutionResult:
        counters = kwargs.get("counters")
        self.given.append(counters if isinstance(counters, Path) else None)
        (out / OUTPUT).mkdir(parents=True)
        self.files(out / OUTPUT)
        return ExecutionResult(0, False, False, None, self.report.model_dump(mode="json"), "# summary", "")


def run_job(
    api: ServiceClient, db: Database, engine: EngineThatSaves, job: JobSpec, root: Path | None
) -> list[str]:
    archive = project_archive({"transpose.cu": "// the uploaded project\n"})
    assert job.repository is not None
    name = job.repository.url.removeprefix("https://github.com/").removesuffix(".git")
    with db.session() as session:
        queued, _ = submit(session, job, principal=ADMIN, repository=name, archive=archive)
        delivery = new_deliveries(session, [queued.id])[queued.id]
    heartbeat = Heartbeat(api, "w-test", ["gpu.nvidia.any"], None, interval_s=60)
    runner = JobRunner(api, engine, "w-test", heartbeat=heartbeat, counter_root=root)  # type: ignore[arg-type]
    assert runner.run(queued.id, delivery) == "succeeded"
    with db.session() as session:
        return list(session.scalars(select(JobEvent.message).where(JobEvent.job_id == queued.id)))


def test_a_base_branch_job_adds_its_counters_to_its_repository_s_folder_and_a_pull_request_s_does_not(
    tmp_path: Path, api: ServiceClient, db: Database, saved: tuple[Path, Report]
) -> None:
    entry, report = saved
    root = tmp_path / "root"
    engine = EngineThatSaves(report, lambda out: shutil.copy(entry, out / entry.name))
    acme = repository_folder(root, "acme/kernels")
    events = run_job(api, db, engine, spec("feature"), root)
    assert engine.given == [acme] and acme is not None and acme.is_dir() and not any(acme.iterdir())
    assert not any("counters" in e for e in events)
    events = run_job(api, db, engine, spec("main"), root)
    assert [p.name for p in acme.iterdir()] == [entry.name]
    assert "counters of 1 kernel(s) kept for later pushes to reuse" in events
    run_job(api, db, engine, spec("main", repository="other/repo"), root)
    other = repository_folder(root, "other/repo")
    assert engine.given[-1] == other and other is not None and other != acme
    assert [p.name for p in acme.iterdir()] == [entry.name]  # the other repository's entry went to its own


def test_a_refused_entry_is_said_in_the_job_s_events_and_not_kept(
    tmp_path: Path, api: ServiceClient, db: Database, saved: tuple[Path, Report]
) -> None:
    entry, report = saved
    root = tmp_path / "root"
    engine = EngineThatSaves(report, lambda out: (out / ("0" * 64 + ".json")).write_bytes(entry.read_bytes()))
    events = run_job(api, db, engine, spec("main"), root)
    acme = repository_folder(root, "acme/kernels")
    assert acme is not None and not any(acme.iterdir())
    assert f"counters not kept: {'0' * 64}.json: its key is not the one its name says" in events


def test_a_worker_without_a_counter_root_gives_jobs_no_counters(
    api: ServiceClient, db: Database, saved: tuple[Path, Report]
) -> None:
    entry, report = saved
    engine = EngineThatSaves(report, lambda out: shutil.copy(entry, out / entry.name))
    events = run_job(api, db, engine, spec("main"), None)
    assert engine.given == [None] and not any("counters" in e for e in events)

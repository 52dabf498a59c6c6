"""Counters between jobs through the service, whichever node runs them: a job gets its repository's entries
in a folder of its own scratch; only a job cloned from the tracked base branch sends its new ones back
(never an uploaded archive, whatever ref its spec names), and only those that hold up (a job is untrusted
code); a failing service costs reuse, never the job.

The runners (two nodes: two JobRunners, each with its scratch folder and its run) run against the real
service; the engine is replaced by an executor that leaves in the job's output what the real engine saved
for transpose_bank's recorded profile (tests.support.counter_entries). A git job's clone is replaced by a
prepared project folder (``Node._fetch``): the worker refuses to clone from hosts outside github_hosts, a
local file:// repository included, and the clone is tested in tests/worker/test_gpu_and_source.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal

import pytest
from sqlalchemy import select

from intelliperf.contract import JobSpec, Report
from intelliperf.contract.worker import ClaimedJob, CounterEntryInfo, CounterEntryStored
from service.auth import ADMIN
from service.db.models import CounterEntry, JobEvent
from service.db.session import Database
from service.deliveries import new_deliveries
from service.jobs import submit
from tests.service.conftest import WORKER_TOKEN, project_archive
from tests.support.counter_entries import SavedEntry, repository_of, saved_entry, spec, under_code_hash
from worker.counter_entries import OUTPUT
from worker.executor import ExecutionResult
from worker.heartbeat import Heartbeat
from worker.runner import JobRunner
from worker.service_client import ServiceClient, ServiceError


@pytest.fixture(scope="module")
def entry(tmp_path_factory: pytest.TempPathFactory) -> SavedEntry:
    return saved_entry(tmp_path_factory.mktemp("saved"))


@pytest.mark.parametrize(
    ("job", "source", "kept"),
    [
        (spec("main"), "git", True),
        (spec("refs/heads/main"), "git", True),
        (spec("feature"), "git", False),
        (spec("main", track=False), "git", False),
        (JobSpec.model_validate({"applications": [{"command": "./a"}], "track": {}}), "git", False),
        (spec("main"), "archive", False),
        (spec("refs/heads/main"), "archive", False),
        (spec("feature"), "archive", False),
    ],
    ids=[
        "base branch",
        "base branch as a ref",
        "another branch",
        "not tracked",
        "no repository",
        "archive on the base branch",
        "archive on the base branch as a ref",
        "archive on another branch",
    ],
)
def test_only_a_job_cloned_from_its_tracked_base_branch_publishes_counters(
    job: JobSpec, source: Literal["archive", "git"], kept: bool
) -> None:
    assert job.publishes_counters(source) is kept


class EngineThatSaves:
    """Stands in for the engine: leaves ``files`` in the job's counters output, returns ``report``, and
    notes the counters folder it was given and the entries in it."""

    def __init__(self, report: Report, files: Callable[[Path], None] = lambda _out: None) -> None:
        self.report, self.files = report, files
        self.given: list[Path | None] = []
        self.seen: list[list[str]] = []

    def run(self, spec: JobSpec, project: Path, out: Path, **kwargs: object) -> ExecutionResult:
        counters = kwargs.get("counters")
        self.given.append(counters if isinstance(counters, Path) else None)
        self.seen.append(sorted(p.name for p in counters.iterdir()) if isinstance(counters, Path) else [])
        (out / OUTPUT).mkdir(parents=True)
        self.files(out / OUTPUT)
        return ExecutionResult(0, False, False, None, self.report.model_dump(mode="json"), "# summary", "")


class Node(JobRunner):
    """A JobRunner whose git jobs get a prepared project folder in place of a clone of their repository
    (a https://github.com URL, not reachable here); an archive job's project is its uploaded archive."""

    def _fetch(self, job: ClaimedJob, spec: JobSpec, destination: Path, token: str | None) -> Path:
        if job.source != "git":
            return super()._fetch(job, spec, destination, token)
        destination.mkdir(parents=True)
        (destination / "transpose.cu").write_text("// the cloned project\n")
        return destination


def node(api: ServiceClient, engine: EngineThatSaves, work_dir: Path, reuse: bool = True) -> JobRunner:
    """A worker node: its own scratch folder and its own run."""
    work_dir.mkdir(parents=True, exist_ok=True)
    heartbeat = Heartbeat(api, work_dir.name, ["gpu.nvidia.any"], None, interval_s=60)
    return Node(
        api,
        engine,
        work_dir.name,
        heartbeat=heartbeat,
        work_dir=work_dir,
        reuse_counters=reuse,  # type: ignore[arg-type]
    )


def run_job(
    db: Database, runner: JobRunner, job: JobSpec, source: Literal["archive", "git"] = "git"
) -> list[str]:
    """The job run on ``runner`` from a clone of its repository (``source`` "git") or an uploaded archive,
    succeeded; its events."""
    archive = project_archive({"transpose.cu": "// the uploaded project\n"}) if source == "archive" else None
    with db.session() as session:
        queued, _ = submit(session, job, principal=ADMIN, repository=repository_of(job), archive=archive)
        assert queued.source == source
        delivery = new_deliveries(session, [queued.id])[queued.id]
    assert runner.run(queued.id, delivery) == "succeeded"
    with db.session() as session:
        return list(session.scalars(select(JobEvent.message).where(JobEvent.job_id == queued.id)))


def kept(db: Database) -> list[tuple[str, str]]:
    with db.session() as session:
        return [(r, k) for r, k in session.execute(select(CounterEntry.repository, CounterEntry.key))]


def test_counters_one_node_measured_on_the_base_branch_reach_a_later_job_of_the_repository_on_another(
    tmp_path: Path, api: ServiceClient, db: Database, entry: SavedEntry
) -> None:
    engine = EngineThatSaves(entry.report, lambda out: (out / entry.name).write_bytes(entry.body))
    node_a, node_b = node(api, engine, tmp_path / "a"), node(api, engine, tmp_path / "b")

    events = run_job(db, node_b, spec("feature"), "archive")  # a pull request's counters are not kept
    assert engine.seen == [[]] and not any("counters" in e for e in events) and kept(db) == []
    events = run_job(db, node_a, spec("main"))
    assert "counters of 1 kernel(s) kept for later pushes to reuse" in events
    assert kept(db) == [("acme/kernels", entry.key)]

    events = run_job(db, node_b, spec("feature"), "archive")
    assert engine.seen[-1] == [entry.name]
    given = engine.given[-1]
    assert given is not None and given.is_relative_to(tmp_path / "b") and not given.exists()  # scratch gone
    assert "counter entries of acme/kernels to reuse: 1" in events

    run_job(db, node_b, spec("main", repository="other/repo"))  # another repository's job sees none
    assert engine.seen[-1] == []
    assert sorted(kept(db)) == [("acme/kernels", entry.key), ("other/repo", entry.key)]
    run_job(db, node_b, spec(repository=None), "archive")  # a job without a repository gets no folder
    assert engine.given[-1] is None


def test_an_archive_job_on_the_base_branch_reuses_the_repository_s_entries_and_uploads_none(
    tmp_path: Path, api: ServiceClient, db: Database, entry: SavedEntry
) -> None:
    """An uploaded archive's spec naming the base branch is only what its submitter wrote: what it measures
    is never kept (here a kernel the branch does not have, which would be a new entry)."""
    engine = EngineThatSaves(entry.report, lambda out: (out / entry.name).write_bytes(entry.body))
    run_job(db, node(api, engine, tmp_path / "a"), spec("main"))
    assert kept(db) == [("acme/kernels", entry.key)]

    planted = under_code_hash(entry, "00000000000000bb")
    archive = EngineThatSaves(entry.report, lambda out: (out / planted.name).write_bytes(planted.body))
    for ref in ("main", "refs/heads/main"):
        events = run_job(db, node(api, archive, tmp_path / "b"), spec(ref), "archive")
        assert archive.seen[-1] == [entry.name]  # it reads them
        assert "counter entries of acme/kernels to reuse: 1" in events
        assert not any("kept" in e for e in events)
        assert kept(db) == [("acme/kernels", entry.key)]


def test_a_refused_entry_is_said_in_the_job_s_events_and_the_others_are_kept(
    tmp_path: Path, api: ServiceClient, db: Database, entry: SavedEntry
) -> None:
    def files(out: Path) -> None:
        (out / entry.name).write_bytes(entry.body)
        (out / ("0" * 64 + ".json")).write_bytes(entry.body)  # another key's name
        (out / ("1" * 64 + ".json")).write_text("{ not json")
        (out / "notes.txt").write_text("hello")
        (out / ("2" * 64 + ".json")).symlink_to("/etc/passwd")

    events = run_job(db, node(api, EngineThatSaves(entry.report, files), tmp_path / "a"), spec("main"))
    assert kept(db) == [("acme/kernels", entry.key)]
    assert "counters of 1 kernel(s) kept for later pushes to reuse" in events
    refused = dict(e.removeprefix("counters not kept: ").split(": ", 1) for e in events if "not kept: " in e)
    assert refused["0" * 64 + ".json"] == "its key is not the one its name says"
    assert refused["1" * 64 + ".json"].startswith(
        "1 validation error(s), the first at the entry: Invalid JSON"
    )
    assert refused["2" * 64 + ".json"] == "not a plain file"
    assert refused["notes.txt"] == "not an entry's name"
    assert len(refused) == 4


class FailingService(ServiceClient):
    """The real service, but for the counters' calls that ``fails`` names, which fail as an unreachable
    service's do."""

    def __init__(self, api: ServiceClient, fails: set[str]) -> None:
        super().__init__(str(api.http.base_url), WORKER_TOKEN, retry_s=5)
        self.fails = fails

    def counter_entries(self, job_id: str, run_id: str) -> list[CounterEntryInfo]:
        if "download" in self.fails:
            raise ServiceError(f"listing the counter entries of job {job_id}: the service did not answer")
        return super().counter_entries(job_id, run_id)

    def put_counter_entry(self, job_id: str, run_id: str, key: str, body: bytes) -> CounterEntryStored:
        if "upload" in self.fails:
            raise ServiceError(f"storing counter entry {key} of job {job_id}: the service did not answer")
        return super().put_counter_entry(job_id, run_id, key, body)


def test_a_failed_download_or_upload_leaves_the_job_succeeding_with_a_note(
    tmp_path: Path, api: ServiceClient, db: Database, entry: SavedEntry
) -> None:
    engine = EngineThatSaves(entry.report, lambda out: (out / entry.name).write_bytes(entry.body))
    run_job(db, node(api, engine, tmp_path / "a"), spec("main"))
    assert kept(db) == [("acme/kernels", entry.key)]

    with FailingService(api, {"download"}) as failing:
        events = run_job(db, node(failing, engine, tmp_path / "b"), spec("main"))
    assert engine.seen[-1] == [] and engine.given[-1] is not None  # no reuse, yet it measures and publishes
    assert any(e.startswith("counters of earlier jobs not downloaded, none reused: listing") for e in events)
    assert "counters of 1 kernel(s) kept for later pushes to reuse" in events

    with FailingService(api, {"upload"}) as failing:
        events = run_job(db, node(failing, engine, tmp_path / "c"), spec("main"))
    assert engine.seen[-1] == [entry.name]
    assert any(e.startswith("counters not kept, uploading them failed: storing") for e in events)


def test_a_worker_that_does_not_reuse_counters_neither_downloads_nor_uploads(
    tmp_path: Path, api: ServiceClient, db: Database, entry: SavedEntry
) -> None:
    engine = EngineThatSaves(entry.report, lambda out: (out / entry.name).write_bytes(entry.body))
    events = run_job(db, node(api, engine, tmp_path / "a", reuse=False), spec("main"))
    assert engine.given == [None] and not any("counters" in e for e in events) and kept(db) == []


class Restarting(BaseHTTPRequestHandler):
    """A service that answers 503 while it restarts (its first ANSWERS_503 requests), then an empty list:
    a client that waited it out would see no error (after ~25 s), one that gave up sees one at once."""

    ANSWERS_503 = 6
    requests = 0

    def do_GET(self) -> None:
        type(self).requests += 1
        body = b"" if self.requests <= self.ANSWERS_503 else b'{"entries": []}'
        self.send_response(503 if self.requests <= self.ANSWERS_503 else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


def test_the_counters_calls_give_up_on_an_unavailable_service_long_before_the_jobs_own_calls() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Restarting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        with ServiceClient(url, WORKER_TOKEN, retry_s=3600, counter_retry_s=1.0) as client:
            began = time.monotonic()
            with pytest.raises(ServiceError, match="the service did not answer"):
                client.counter_entries("job", "run")
            assert time.monotonic() - began < 5 and Restarting.requests < Restarting.ANSWERS_503
    finally:
        server.shutdown()
        server.server_close()

"""Counter entries kept by the service, per repository, through the real server (SQLite and PostgreSQL):
the run that holds a job reads its repository's entries and no other's; only a job that publishes (cloned
from its tracked base branch: an uploaded archive never does) adds to them, each entry checked (a bad one
refused with the reason, the others kept); beyond counter_store_max_bytes the repository's oldest go
first; the migration goes both ways."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Literal

import httpx
import pytest
from alembic import command
from sqlalchemy import inspect

from intelliperf.contract import JobSpec
from intelliperf.contract.counters import ENTRY_LIMIT_BYTES, entry_refusal
from service.auth import ADMIN
from service.db.migrate import alembic_config
from service.db.session import Database
from service.deliveries import new_deliveries
from service.jobs import submit
from service.settings import ServiceSettings
from tests.service.conftest import WORKER_TOKEN, project_archive, serve
from tests.support.counter_entries import SavedEntry, repository_of, saved_entry, spec, under_code_hash
from tests.support.databases import assert_migration_adds
from worker.service_client import (
    ContentRefused,
    Forbidden,
    JobNotHeld,
    NotDelivered,
    ServiceClient,
)

ARCHIVE = project_archive({"transpose.cu": "// the uploaded project\n"})


@pytest.fixture(scope="module")
def entry(tmp_path_factory: pytest.TempPathFactory) -> SavedEntry:
    return saved_entry(tmp_path_factory.mktemp("saved"))


def held(
    db: Database,
    api: ServiceClient,
    job: JobSpec,
    run_id: str = "run-a",
    source: Literal["archive", "git"] = "git",
) -> str:
    """A job of ``job``'s repository (as the service names it from its URL), claimed by ``run_id``: one the
    worker would clone (``source`` "git", submitted without an archive; these tests only call the API, so
    nothing is cloned) or one with an uploaded archive."""
    archive = ARCHIVE if source == "archive" else None
    with db.session() as session:
        queued, _ = submit(session, job, principal=ADMIN, repository=repository_of(job), archive=archive)
        assert queued.source == source
        delivery = new_deliveries(session, [queued.id])[queued.id]
    assert api.claim(queued.id, "w-test", run_id, delivery) is not None
    return queued.id


@pytest.fixture
def api(settings: ServiceSettings, db: Database) -> Iterator[ServiceClient]:
    with serve(settings, dispatch=False) as live, ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as client:
        yield client


def keys(api: ServiceClient, job_id: str, run_id: str = "run-a") -> list[str]:
    return [e.key for e in api.counter_entries(job_id, run_id)]


def test_a_publishing_job_s_entries_reach_later_jobs_of_its_repository_and_no_other(
    api: ServiceClient, db: Database, entry: SavedEntry
) -> None:
    base = held(db, api, spec("refs/heads/main"))
    stored = api.put_counter_entry(base, "run-a", entry.key, entry.body)
    assert (stored.key, stored.bytes, stored.dropped) == (entry.key, len(entry.body), 0)

    pull_request = held(  # names ignore case
        db, api, spec("feature", repository="ACME/Kernels"), "run-b", source="archive"
    )
    assert keys(api, pull_request, "run-b") == [entry.key]
    assert api.counter_entry(pull_request, "run-b", entry.key) == entry.body
    with pytest.raises(Forbidden, match="publishes no counters") as refused:  # 403
        api.put_counter_entry(pull_request, "run-b", entry.key, entry.body)
    assert not isinstance(refused.value, NotDelivered), "a refused upload is not a claim's unknown delivery"
    with pytest.raises(JobNotHeld):
        api.counter_entries(base, "run-b")
    with pytest.raises(JobNotHeld):
        api.put_counter_entry(pull_request, "run-a", entry.key, entry.body)

    no_repository = held(db, api, spec(repository=None), source="archive")
    for other in (held(db, api, spec(repository="other/repo")), no_repository):
        assert keys(api, other) == []
        assert api.counter_entry(other, "run-a", entry.key) is None
    untracked = held(db, api, spec(track=False))
    with pytest.raises(Forbidden, match="publishes no counters: only a job cloned from the base branch"):
        api.put_counter_entry(untracked, "run-a", entry.key, entry.body)


def test_an_archive_job_on_its_base_branch_reads_its_repository_s_entries_but_never_publishes(
    api: ServiceClient, db: Database, entry: SavedEntry
) -> None:
    """An uploaded archive's spec may name the base branch, but its ref is only what the submitter wrote:
    any token scoped to the repository (a pull request's CI) could otherwise plant what the branch reuses."""
    base = held(db, api, spec("main"))
    api.put_counter_entry(base, "run-a", entry.key, entry.body)
    planted = under_code_hash(entry, "00000000000000bb")

    for ref in ("main", "refs/heads/main"):
        archive = held(db, api, spec(ref), "run-b", source="archive")
        assert keys(api, archive, "run-b") == [entry.key]  # it reads them: its token is the repository's
        with pytest.raises(Forbidden) as refused:  # 403
            api.put_counter_entry(archive, "run-b", planted.key, planted.body)
        assert "publishes no counters" in str(refused.value)
        assert "an uploaded archive's code is not known to be the branch's" in str(refused.value)
    assert keys(api, base) == [entry.key]


def test_a_bad_entry_is_refused_with_the_reason_and_the_good_ones_are_kept(
    settings: ServiceSettings, db: Database, entry: SavedEntry
) -> None:
    tampered = json.loads(entry.body)
    tampered["profile"]["metrics"] = "all fast"  # under its own key, a profile that is none
    small = settings.model_copy(update={"counter_store_max_bytes": len(entry.body)})
    with serve(small, dispatch=False) as live, ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
        job_id = held(db, api, spec())
        refused = {}
        for name, key, body in [
            ("another key's", "0" * 64, entry.body),
            ("not JSON", "1" * 64, b"{ not json"),
            ("tampered", entry.key, json.dumps(tampered).encode()),
            ("too large", "2" * 64, entry.body + b" "),
        ]:
            with pytest.raises(ContentRefused) as caught:
                api.put_counter_entry(job_id, "run-a", key, body)
            refused[name] = caught.value.reason
        url = f"{live.url}/v1/worker/jobs/{job_id}/counters"
        auth = {"Authorization": f"Bearer {WORKER_TOKEN}"}
        chunked = httpx.put(  # no Content-Length: the size is checked once the body is in
            f"{url}/{'3' * 64}", params={"run_id": "run-a"}, content=iter([entry.body, b" "]), headers=auth
        )
        not_a_key = httpx.put(f"{url}/{'g' * 64}", params={"run_id": "run-a"}, content=b"{}", headers=auth)
        assert api.put_counter_entry(job_id, "run-a", entry.key, entry.body).bytes == len(entry.body)
        assert keys(api, job_id) == [entry.key]
    assert refused["another key's"] == "its key is not the one its name says"
    assert refused["not JSON"].startswith("1 validation error(s), the first at the entry: Invalid JSON")
    assert "validation error(s), the first at metrics:" in refused["tampered"]
    over = f"{len(entry.body) + 1} bytes, over the {len(entry.body)} an entry may have"
    assert refused["too large"].startswith(over) and "counter_store_max_bytes" in refused["too large"]
    assert chunked.status_code == 413 and chunked.json()["detail"].startswith(over)
    assert not_a_key.status_code == 422


def test_an_entry_over_the_limit_of_any_entry_is_refused_unread() -> None:
    assert entry_refusal(b" " * (ENTRY_LIMIT_BYTES + 1), "0" * 64) == f"larger than {ENTRY_LIMIT_BYTES} bytes"


def test_beyond_the_repository_s_bytes_the_oldest_entries_go_first(
    settings: ServiceSettings, db: Database, entry: SavedEntry
) -> None:
    """Entries of one size, room for three: three are kept, a fourth drops exactly the oldest; publishing a
    key again replaces it and makes it the newest; another repository's entries count for it alone."""
    entries = [under_code_hash(entry, f"{n:016x}") for n in range(5)]
    assert len({len(e.body) for e in entries}) == 1
    room = settings.model_copy(update={"counter_store_max_bytes": 3 * len(entry.body)})
    with serve(room, dispatch=False) as live, ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
        job_id = held(db, api, spec())
        dropped = [api.put_counter_entry(job_id, "run-a", e.key, e.body).dropped for e in entries[:3]]
        assert dropped == [0, 0, 0]
        assert keys(api, job_id) == [e.key for e in reversed(entries[:3])]
        assert api.put_counter_entry(job_id, "run-a", entries[3].key, entries[3].body).dropped == 1
        assert keys(api, job_id) == [entries[3].key, entries[2].key, entries[1].key]
        assert api.put_counter_entry(job_id, "run-a", entries[1].key, entries[1].body).dropped == 0
        assert keys(api, job_id) == [entries[1].key, entries[3].key, entries[2].key]
        assert api.put_counter_entry(job_id, "run-a", entries[4].key, entries[4].body).dropped == 1
        assert keys(api, job_id) == [entries[4].key, entries[1].key, entries[3].key]  # 2 was the oldest

        other = held(db, api, spec(repository="other/repo"))
        assert api.put_counter_entry(other, "run-a", entry.key, entry.body).dropped == 0
        assert keys(api, other) == [entry.key]
        assert len(keys(api, job_id)) == 3


def test_the_counter_entries_migration_upgrades_and_downgrades(database_url: str) -> None:
    config = alembic_config(database_url)
    database = Database(database_url)
    try:
        assert_migration_adds(database_url, database, "0007", "counter_entries", ["repository", "key"])
        command.downgrade(config, "0007")
        assert "counter_entries" not in inspect(database.engine).get_table_names()
    finally:
        database.dispose()

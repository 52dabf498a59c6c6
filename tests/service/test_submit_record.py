"""What a submission writes, on SQLite and PostgreSQL: the job and its first event, in as few statements as
the database allows (on PostgreSQL one: the submission's round trips were a third of its server CPU)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event, select

from intelliperf.contract import JobSpec
from service.auth import ADMIN
from service.db.models import Job, JobEvent
from service.db.session import Database
from service.jobs import submit

SPEC = JobSpec.model_validate(
    {"repository": {"url": "https://github.com/acme/kernels.git"}, "applications": [{"command": "./app"}]}
)


@contextmanager
def inserts(db: Database) -> Iterator[list[str]]:
    """The INSERT statements the engine sends while the block runs."""
    sent: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        if "INSERT" in statement.upper():
            sent.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def test_a_submission_writes_the_job_and_its_queued_event(db: Database) -> None:
    with inserts(db) as sent, db.session() as session:
        job, created = submit(session, SPEC, principal=ADMIN, repository="acme/kernels", priority=7)
    assert created
    assert len(sent) == (1 if db.dialect == "postgresql" else 2)
    with db.session() as session:
        stored = session.get(Job, job.id)
        events = session.scalars(select(JobEvent).where(JobEvent.job_id == job.id)).all()
    assert stored is not None
    assert (stored.status, stored.priority, stored.repository, stored.queue) == (
        "queued", 7, "acme/kernels", "gpu.nvidia.any"
    )  # fmt: skip
    assert [(e.kind, e.stage, e.message) for e in events] == [("state", "queued", "queued on gpu.nvidia.any")]
    assert events[0].created_at == stored.created_at


def test_a_keyed_submission_and_its_replay_write_one_job_and_one_event(db: Database) -> None:
    keyed = {"principal": ADMIN, "repository": "acme/kernels", "idempotency_key": "k1"}
    with db.session() as session:
        first, created = submit(session, SPEC, **keyed)  # type: ignore[arg-type]
    with db.session() as session:
        again, replayed_created = submit(session, SPEC, **keyed)  # type: ignore[arg-type]
    assert created and not replayed_created and again.id == first.id
    with db.session() as session:
        assert len(session.scalars(select(Job)).all()) == 1
        assert len(session.scalars(select(JobEvent)).all()) == 1

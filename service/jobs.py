"""The job record: submission (idempotent), queries, events, cancellation, and a worker's claim (its end:
service.job_end).

Every function takes the caller's Session and leaves committing to it, so a job and its archive and
first event are written in one transaction or not at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import bindparam, func, insert, literal, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from intelliperf.contract import JobSpec
from intelliperf.repository_hosts import repository_name
from service.auth import Principal
from service.db.models import FINISHED, Job, JobArchive, JobEvent, JobEventBatch, utcnow
from service.db.session import upsert_insert
from service.deliveries import forget_deliveries
from service.job_log import note
from service.secrets import delete_secrets

log = logging.getLogger(__name__)

__all__ = [
    "DueJob",
    "IdempotencyConflict",
    "JobPage",
    "add_event",
    "add_event_batch",
    "claim",
    "due_for_dispatch",
    "events_after",
    "get_job",
    "list_jobs",
    "mark_dispatched",
    "repository_name",
    "request_cancel",
    "submit",
    "unmark_dispatched",
    "unsent_among",
]


class IdempotencyConflict(ValueError):
    """The idempotency key was used before for a different job spec."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"this Idempotency-Key was already used for job {job_id} with a different spec")
        self.job_id = job_id


def _spec_hash(spec: JobSpec | dict[str, Any], archive: bytes | None, priority: int) -> str:
    dumped = spec if isinstance(spec, dict) else spec.model_dump(mode="json")
    digest = hashlib.sha256(json.dumps(dumped, sort_keys=True).encode())
    digest.update(f"|priority={priority}|".encode())
    if archive is not None:
        digest.update(hashlib.sha256(archive).digest())
    return digest.hexdigest()


def add_event(session: Session, job_id: str, kind: str, message: str, stage: str | None = None) -> None:
    session.add(JobEvent(job_id=job_id, kind=kind, stage=stage, message=message))
    note(session, job_id, kind, message, stage)


def add_event_batch(
    session: Session, job_id: str, run_id: str, batch: int, events: list[tuple[str, str, str | None]]
) -> bool:
    """Store a worker run's numbered batch of (kind, message, stage) events; False when this batch was
    stored before (sent again after its answer was lost), and then nothing is written. The batch's number
    goes in with ON CONFLICT DO NOTHING RETURNING (PostgreSQL and SQLite alike): one statement, no
    savepoint."""
    table = JobEventBatch.__table__
    key = {"job_id": job_id, "run_id": run_id, "batch": batch}
    new = upsert_insert(session, table).values(key).on_conflict_do_nothing().returning(table.c.batch)
    if session.execute(new).first() is None:
        return False
    if events:
        now = utcnow()
        rows = [
            {"job_id": job_id, "created_at": now, "kind": kind, "stage": stage, "message": message}
            for kind, message, stage in events
        ]
        session.execute(_INSERT_EVENT, rows)
        for kind, message, stage in events:
            note(session, job_id, kind, message, stage)
    return True


def submit(
    session: Session,
    spec: JobSpec,
    *,
    principal: Principal,
    repository: str | None,
    priority: int = 5,
    idempotency_key: str | None = None,
    archive: bytes | None = None,
) -> tuple[Job, bool]:
    """Record a queued job; returns it and whether it is new (False: the key's earlier job)."""
    dumped = spec.model_dump(mode="json")
    spec_hash = _spec_hash(dumped, archive, priority)
    scope = None
    if idempotency_key is not None:
        scope = f"{principal.token_id if principal.token_id is not None else 'admin'}:{idempotency_key}"
        existing = session.scalar(select(Job).where(Job.idempotency_scope == scope))
        if existing is not None:
            return _same_or_conflict(existing, spec_hash), False
    now = utcnow()
    values: dict[str, Any] = {
        "id": uuid.uuid4().hex,
        "status": "queued",
        "queue": spec.gpu.queue,
        "priority": priority,
        "repository": repository,
        "source": "archive" if archive is not None else "git",
        "spec": dumped,
        "spec_hash": spec_hash,
        "idempotency_scope": scope,
        "token_id": principal.token_id,
        "created_at": now,
        "dispatched_at": None,
        "dispatch_count": 0,
        "started_at": None,
        "finished_at": None,
        "worker": None,
        "worker_run": None,
        "runs": 0,
        "cancel_requested": False,
        "outcome": None,
        "error": None,
        "speedup": None,
        "report": None,
        "diff": None,
        "summary": None,
        "pr_url": None,
    }
    # Core inserts (no unit of work): the rows are written now, in the caller's transaction
    connection = session.connection()
    message = f"queued on {values['queue']}"
    if scope is None and archive is None and connection.dialect.name == "postgresql":
        # the common submission in one round trip: the job and its first event in one statement
        event = {"event_at": now, "event_stage": "queued", "event_message": message}
        connection.execute(_INSERT_JOB_WITH_EVENT, values | event)
        note(session, values["id"], "state", message, "queued")
        return Job(**values), True
    if scope is None:  # nothing unique to collide on
        connection.execute(_INSERT_JOB, values)
    else:
        try:
            with session.begin_nested():  # a concurrent submission with the same key may win
                connection.execute(_INSERT_JOB, values)
        except IntegrityError:
            existing = session.scalar(select(Job).where(Job.idempotency_scope == scope))
            if existing is None:
                raise
            return _same_or_conflict(existing, spec_hash), False
    if archive is not None:
        connection.execute(_INSERT_ARCHIVE, {"job_id": values["id"], "data": archive})
    connection.execute(
        _INSERT_EVENT,
        {"job_id": values["id"], "created_at": now, "kind": "state", "stage": "queued", "message": message},
    )
    note(session, values["id"], "state", message, "queued")
    # the job as it was written, detached (no query to read it back)
    return Job(**values), True


_INSERT_JOB = insert(Job.__table__)
_INSERT_ARCHIVE = insert(JobArchive.__table__)
_INSERT_EVENT = insert(JobEvent.__table__)


def _insert_job_with_event() -> Any:
    """PostgreSQL: INSERT the job and, from its RETURNING, its first event ("state", the bound stage and
    message) in one statement (a data-modifying CTE)."""
    jobs, events = Job.__table__, JobEvent.__table__
    new_job = (
        insert(jobs)
        .values({c.name: bindparam(c.name, type_=c.type) for c in jobs.columns})
        .returning(jobs.c.id)
        .cte("new_job")
    )
    row = select(
        new_job.c.id,
        bindparam("event_at", type_=events.c.created_at.type),
        literal("state", type_=events.c.kind.type),
        bindparam("event_stage", type_=events.c.stage.type),
        bindparam("event_message", type_=events.c.message.type),
    )
    columns = ["job_id", "created_at", "kind", "stage", "message"]
    return insert(events).add_cte(new_job).from_select(columns, row)


_INSERT_JOB_WITH_EVENT = _insert_job_with_event()


def _same_or_conflict(existing: Job, spec_hash: str) -> Job:
    if existing.spec_hash != spec_hash:
        raise IdempotencyConflict(existing.id)
    return existing


def _visible(principal: Principal) -> Any:
    if principal.is_admin or "*" in principal.repositories:
        return True
    # case-insensitive, as Principal.may_access (SQLite's LIKE is, PostgreSQL's is not)
    conditions = [
        func.lower(Job.repository).like(
            scope.lower().replace("%", r"\%").replace("_", r"\_").replace("*", "%"), escape="\\"
        )
        for scope in principal.repositories
    ]
    return or_(*conditions)


def get_job(session: Session, job_id: str, principal: Principal) -> Job | None:
    job = session.get(Job, job_id)
    if job is None or not principal.may_access(job.repository):
        return None
    return job


@dataclass(frozen=True)
class JobPage:
    jobs: list[Job]
    total: int


def list_jobs(
    session: Session,
    principal: Principal,
    *,
    status: str | None = None,
    repository: str | None = None,
    queue: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> JobPage:
    query = select(Job).where(_visible(principal))
    if status is not None:
        query = query.where(Job.status == status)
    if repository is not None:
        query = query.where(Job.repository == repository)
    if queue is not None:
        query = query.where(Job.queue == queue)
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset))
    return JobPage(jobs=list(rows), total=total)


def events_after(session: Session, job_id: str, after_id: int = 0, limit: int = 500) -> list[JobEvent]:
    query = (
        select(JobEvent)
        .where(JobEvent.job_id == job_id, JobEvent.id > after_id)
        .order_by(JobEvent.id)
        .limit(limit)
    )
    return list(session.scalars(query))


def request_cancel(session: Session, job: Job) -> Job:
    """A queued job is cancelled at once; a running one is flagged and its worker stops it."""
    if job.status in FINISHED:
        return job
    if job.status == "queued":
        done = session.execute(
            update(Job)
            .where(Job.id == job.id, Job.status == "queued")
            .values(status="cancelled", cancel_requested=True, finished_at=utcnow(), outcome="cancelled")
        )
        if done.rowcount == 1:  # type: ignore[attr-defined]
            add_event(session, job.id, "state", "cancelled before it started", stage="cancelled")
            delete_secrets(session, job.id)
            forget_deliveries(session, job.id)
            session.refresh(job)
            return job
    session.execute(update(Job).where(Job.id == job.id).values(cancel_requested=True))
    add_event(session, job.id, "state", "cancellation requested")
    session.refresh(job)
    return job


def claim(session: Session, job_id: str, worker: str, run_id: str | None = None) -> Job | None:
    """Mark a queued job running for ``worker`` (its process ``run_id``, see Worker.run_id); None if another
    run has it or it is finished/cancelled.

    The conditional UPDATE is what makes a redelivered or re-dispatched message harmless."""
    done = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == "queued", Job.cancel_requested.is_(False))
        .values(status="running", worker=worker, worker_run=run_id, started_at=utcnow(), runs=Job.runs + 1)
    )
    if done.rowcount != 1:  # type: ignore[attr-defined]
        return None
    add_event(session, job_id, "state", f"started on {worker}", stage="running")
    return session.get(Job, job_id)


class DueJob(NamedTuple):
    id: str
    queue: str
    priority: int


def due_for_dispatch(
    session: Session, now: datetime, redispatch_after: timedelta, limit: int = 500
) -> list[DueJob]:
    """Queued jobs never sent to the broker, or sent so long ago that the message may be lost: only what a
    message needs. The rows stay locked until the session ends; another dispatcher skips them."""
    query = (
        select(Job.id, Job.queue, Job.priority)
        .where(
            Job.status == "queued",
            Job.cancel_requested.is_(False),
            or_(Job.dispatched_at.is_(None), Job.dispatched_at < now - redispatch_after),
        )
        .order_by(Job.priority.desc(), Job.created_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [DueJob(*row) for row in session.execute(query)]


def unsent_among(session: Session, job_ids: list[str]) -> list[DueJob]:
    """Of these jobs, those still queued and never sent, by primary key, in due_for_dispatch's order and
    locked as it locks them (another dispatcher, or a sweep, skips them)."""
    if not job_ids:
        return []
    query = (
        select(Job.id, Job.queue, Job.priority)
        .where(
            Job.id.in_(job_ids),
            Job.status == "queued",
            Job.cancel_requested.is_(False),
            Job.dispatched_at.is_(None),
        )
        .order_by(Job.priority.desc(), Job.created_at)
        .with_for_update(skip_locked=True)
    )
    return [DueJob(*row) for row in session.execute(query)]


def mark_dispatched(session: Session, job_ids: list[str], when: datetime) -> None:
    if job_ids:
        session.execute(
            update(Job)
            .where(Job.id.in_(job_ids))
            .values(dispatched_at=when, dispatch_count=Job.dispatch_count + 1)
        )


def unmark_dispatched(session: Session, job_ids: list[str], when: datetime) -> None:
    """Take back ``mark_dispatched(..., when)`` for jobs whose messages did not reach the broker (unless a
    later pass has marked them since)."""
    if job_ids:
        session.execute(
            update(Job)
            .where(Job.id.in_(job_ids), Job.dispatched_at == when)
            .values(dispatched_at=None, dispatch_count=Job.dispatch_count - 1)
        )

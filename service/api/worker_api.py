"""The worker API: everything a GPU node needs from the service, over HTTP with the worker token.

A worker holds only the broker's URL, the service's URL and the worker token (as Airflow 3's workers
moved off the database onto a task-execution API): it claims a job here and is given its spec, source
and secrets once; it fetches the job's archive, writes its events and its result, and asks whether it
was cancelled. A claim must name the delivery that brought the job (the secret in its broker message,
service.deliveries): the worker token alone claims nothing (403). Only the run that claimed a job (its
``run_id``, one per worker process start) may do the rest; any other gets 409, so a worker restarted under
the same name, or a run the reaper took the job from, never writes into it. A claim repeated by the run
that holds it returns the job again, so a claim whose answer was lost is not a lost job; an events batch
sent again (its number already stored) is stored once. While the database is down every call answers 503
with Retry-After (service.api.app), and the worker retries.

Counter entries (service.counter_entries) are those of the job's repository, which the service knows: a
job never names another's, and a job without a repository has none. Only a job that publishes
(``JobSpec.publishes_counters``: cloned from the base branch it tracks, never an uploaded archive) may
add to them, one entry per request, each checked as untrusted input.
"""

from __future__ import annotations

import hmac
import re
from datetime import timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi import Path as PathParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from intelliperf.contract import JobSpec
from intelliperf.contract.counters import COUNTER_KEY, ENTRY_LIMIT_BYTES, entry_refusal
from intelliperf.contract.worker import (
    ClaimedJob,
    ClaimRequest,
    CounterEntries,
    CounterEntryStored,
    EventsIn,
    JobResult,
    ReproducerStored,
    WorkerBeat,
)
from service.api.deps import get_db, get_settings
from service.counter_entries import entry_body, list_entries, store_entry
from service.db.models import FINISHED, Job, JobArchive, Worker, utcnow
from service.deliveries import is_delivered
from service.job_end import finish
from service.jobs import add_event_batch, claim
from service.reproducers import ReproducerTooLarge, store_reproducer
from service.secrets import SecretBox, SecretError, load_secrets

__all__ = ["COUNTER_UPLOAD", "REPRODUCER_UPLOAD", "router"]

REPRODUCER_UPLOAD = re.compile(r"/v1/worker/jobs/[^/]+/reproducer")  # its own body limit (service.api.app)
COUNTER_UPLOAD = re.compile(r"/v1/worker/jobs/[^/]+/counters/[^/]+")  # ENTRY_LIMIT_BYTES (service.api.app)

router = APIRouter(
    prefix="/v1/worker",
    tags=["worker API"],
    responses={
        400: {"description": "A body that is not JSON"},
        401: {"description": "No worker token, or not the worker token"},
        403: {"description": "A claim that names no delivery of the job"},
        404: {"description": "No such job (job routes)"},
        409: {"description": "The job is not queued (claim) or not held by this run (the other job routes)"},
    },
)
_bearer = HTTPBearer(auto_error=False, description="The worker token (INTELLIPERF_WORKER_TOKEN)")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _worker_token(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> None:
    expected = get_settings(request).worker_secret
    if expected is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "this service has no worker token (INTELLIPERF_WORKER_TOKEN): it accepts no worker",
            _CHALLENGE,
        )
    given = credentials.credentials if credentials is not None else ""
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "not the worker token", _CHALLENGE)


WorkerToken = Annotated[None, Depends(_worker_token)]


def _held(session: Session, job_id: str, run_id: str, *, finished_too: bool = False) -> Job:
    """The job, if ``run_id`` holds it: running, or (``finished_too``) finished by that run; else 404 or
    409. The reaper clears the run of a job it takes back or fails, so a lost run's writes are refused."""
    job = session.get(Job, job_id)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id}")
    states = ("running", *FINISHED) if finished_too else ("running",)
    if job.worker_run != run_id or job.status not in states:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id} is not held by run {run_id}")
    return job


@router.put("/workers/{name}", status_code=status.HTTP_204_NO_CONTENT, summary="A worker's heartbeat")
def heartbeat(name: str, beat: WorkerBeat, request: Request, _: WorkerToken) -> Response:
    with get_db(request).session() as session:
        row = session.get(Worker, name)
        if row is None:
            row = Worker(name=name, hostname=beat.hostname, started_at=utcnow(), queues=beat.queues)
            session.add(row)
        if row.run_id != beat.run_id:  # this process's first beat
            row.run_id, row.started_at, row.hostname = beat.run_id, utcnow(), beat.hostname
        row.queues = beat.queues
        row.gpu_vendor, row.gpu_name, row.gpu_arch = beat.gpu_vendor, beat.gpu_name, beat.gpu_arch
        row.gpu_memory_bytes = beat.gpu_memory_bytes
        row.current_job = beat.current_job
        row.last_heartbeat = utcnow()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/workers", summary="This host's workers and whether each is alive (the image's healthcheck)")
def host_workers(hostname: str, request: Request, _: WorkerToken) -> list[dict[str, object]]:
    stale = utcnow() - timedelta(seconds=get_settings(request).worker_stale_s)
    with get_db(request).session() as session:
        rows = session.scalars(select(Worker).where(Worker.hostname == hostname).order_by(Worker.name)).all()
        return [{"name": w.name, "alive": w.last_heartbeat >= stale} for w in rows]


@router.post(
    "/jobs/{job_id}/claim",
    response_model=ClaimedJob,
    responses={
        403: {"description": "The claim names no delivery of this job"},
        409: {"description": "Not queued: finished, cancelled or held by another run"},
    },
    summary="Take a queued job: its spec, source and secrets",
)
def claim_job(job_id: str, body: ClaimRequest, request: Request, _: WorkerToken) -> ClaimedJob:
    settings = get_settings(request)
    with get_db(request).session() as session:
        if not is_delivered(session, job_id, body.delivery):
            raise HTTPException(
                status.HTTP_403_FORBIDDEN,
                f"this claim names no delivery of job {job_id}: a job is claimed with the secret of the "
                "broker message that brought it, not with the worker token alone",
            )
        job = claim(session, job_id, body.worker, body.run_id)
        if job is None:
            held = session.get(Job, job_id)
            if held is None or held.status != "running" or held.worker_run != body.run_id:
                raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id} is not queued")
            job = held  # this run's claim again: its first answer was lost
        secrets, secrets_error = {}, None
        try:
            box = SecretBox(settings.secret_key) if settings.secret_key else None
            secrets = load_secrets(session, job_id, box)
        except SecretError as exc:
            secrets_error = str(exc)
        return ClaimedJob(
            id=job.id,
            spec=JobSpec.model_validate(job.spec),
            source="archive" if job.source == "archive" else "git",
            repository=job.repository,
            secrets=secrets,
            secrets_error=secrets_error,
        )


@router.get(
    "/jobs/{job_id}/archive",
    response_class=Response,
    responses={200: {"content": {"application/gzip": {}}}, 409: {"description": "Not this run's job"}},
    summary="The project archive uploaded with a job",
)
def archive(job_id: str, run_id: str, request: Request, _: WorkerToken) -> Response:
    with get_db(request).session() as session:
        _held(session, job_id, run_id)
        stored = session.get(JobArchive, job_id)
        if stored is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} has no uploaded archive")
        return Response(stored.data, media_type="application/gzip")


@router.post(
    "/jobs/{job_id}/events",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="A batch of a running job's events (a batch number stored before is not stored again)",
)
def events(job_id: str, body: EventsIn, request: Request, _: WorkerToken) -> Response:
    with get_db(request).session() as session:
        _held(session, job_id, body.run_id)
        rows = [(event.kind, event.message, event.stage) for event in body.events]
        add_event_batch(session, job_id, body.run_id, body.batch, rows)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put(
    "/jobs/{job_id}/reproducer",
    response_model=ReproducerStored,
    responses={
        200: {"description": "Stored; the address its user downloads it at"},
        413: {"description": "Larger than the service's max_reproducer_bytes"},
    },
    summary="Store the job's reproducer (a gzipped tar; the body is the file)",
)
async def put_reproducer(job_id: str, run_id: str, request: Request, _: WorkerToken) -> ReproducerStored:
    settings = get_settings(request)

    def held() -> None:
        with get_db(request).session() as session:
            _held(session, job_id, run_id)

    await run_in_threadpool(held)
    limit = settings.max_reproducer_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE,
            f"the reproducer ({declared} bytes) is over the service's {limit} bytes (max_reproducer_bytes)",
        )
    try:
        size = await store_reproducer(settings.data_dir, job_id, request.stream(), limit)
    except ReproducerTooLarge as exc:
        raise HTTPException(status.HTTP_413_CONTENT_TOO_LARGE, f"{exc} (max_reproducer_bytes)") from None
    base = settings.public_url or str(request.base_url)
    return ReproducerStored(url=f"{base.rstrip('/')}/v1/jobs/{job_id}/reproducer", bytes=size)


@router.get("/jobs/{job_id}/cancel", summary="Whether the job's cancellation was asked for")
def cancel_requested(job_id: str, run_id: str, request: Request, _: WorkerToken) -> dict[str, bool]:
    with get_db(request).session() as session:
        job = _held(session, job_id, run_id)
        return {"cancel": bool(job.cancel_requested)}


@router.post(
    "/jobs/{job_id}/result",
    status_code=status.HTTP_204_NO_CONTENT,
    summary="A job's end: its status, outcome, report and diff",
)
def result(job_id: str, body: JobResult, request: Request, _: WorkerToken) -> Response:
    with get_db(request).session() as session:
        job = _held(session, job_id, body.run_id, finished_too=True)
        if job.status == "running":  # a result sent again after a lost answer changes nothing
            fields = body.model_dump(exclude={"run_id", "status"})
            finish(session, job_id, status=body.status, **fields)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


CounterKey = Annotated[str, PathParam(pattern=COUNTER_KEY, description="The entry's key (its file's stem)")]


@router.get(
    "/jobs/{job_id}/counters",
    response_model=CounterEntries,
    summary="The counter entries of the job's repository, newest first (none for a job without one)",
)
def counter_entries(job_id: str, run_id: str, request: Request, _: WorkerToken) -> CounterEntries:
    with get_db(request).session() as session:
        job = _held(session, job_id, run_id)
        return CounterEntries(entries=list_entries(session, job.repository) if job.repository else [])


@router.get(
    "/jobs/{job_id}/counters/{key}",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {}}},
        404: {"description": "No such job, or its repository has no such entry (or no longer)"},
    },
    summary="One counter entry of the job's repository (its bytes, as published)",
)
def counter_entry(job_id: str, key: CounterKey, run_id: str, request: Request, _: WorkerToken) -> Response:
    with get_db(request).session() as session:
        job = _held(session, job_id, run_id)
        body = entry_body(session, job.repository, key) if job.repository else None
        if body is None:
            raise HTTPException(status.HTTP_404_NOT_FOUND, f"the job's repository has no counter entry {key}")
        return Response(body, media_type="application/json")


@router.put(
    "/jobs/{job_id}/counters/{key}",
    response_model=CounterEntryStored,
    responses={
        200: {"description": "Kept for later jobs of the repository; the oldest beyond its limit dropped"},
        400: {"description": "Not an entry: malformed, another key's, a profile that is none (the reason)"},
        403: {
            "description": "The job publishes no counters (not cloned from the base branch it tracks: an "
            "uploaded archive never publishes)"
        },
        413: {"description": "Larger than an entry may be, or than counter_store_max_bytes"},
    },
    summary="Keep a counter entry the job measured (the body is the entry's JSON file)",
)
async def put_counter_entry(
    job_id: str, key: CounterKey, run_id: str, request: Request, _: WorkerToken
) -> CounterEntryStored:
    settings, db = get_settings(request), get_db(request)

    def publisher() -> str:
        with db.session() as session:
            return _publishing_repository(_held(session, job_id, run_id))

    repository = await run_in_threadpool(publisher)
    limit = min(ENTRY_LIMIT_BYTES, settings.counter_store_max_bytes)
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    body = await request.body()
    if len(body) > limit:
        raise _too_large(len(body), limit)
    refusal = await run_in_threadpool(entry_refusal, body, key)
    if refusal is not None:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, refusal)

    def store() -> int:
        with db.session() as session:
            return store_entry(
                session,
                repository=repository,
                key=key,
                body=body,
                job_id=job_id,
                max_bytes=settings.counter_store_max_bytes,
            )

    dropped = await run_in_threadpool(store)
    return CounterEntryStored(key=key, bytes=len(body), dropped=dropped)


def _publishing_repository(job: Job) -> str:
    """The repository the job publishes counters to; 403, saying why, when it publishes none."""
    source: Literal["archive", "git"] = "git" if job.source == "git" else "archive"
    if job.repository is None or not JobSpec.model_validate(job.spec).publishes_counters(source):
        why = (
            "it runs an uploaded archive, and an uploaded archive's code is not known to be the branch's "
            "(only a job cloned from the base branch its spec tracks publishes)"
            if source == "archive"
            else "only a job cloned from the base branch its spec tracks does"
        )
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"job {job.id} publishes no counters: {why}")
    return job.repository


def _too_large(size: int, limit: int) -> HTTPException:
    return HTTPException(
        status.HTTP_413_CONTENT_TOO_LARGE,
        f"{size} bytes, over the {limit} an entry may have (its limit, or counter_store_max_bytes)",
    )

"""/v1/jobs: submit, list, inspect, follow, cancel."""

from __future__ import annotations

import json
import re
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Header, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from pydantic import ValidationError
from sqlalchemy.orm import Session
from starlette.datastructures import UploadFile

from intelliperf.contract import JobSpec, TrackSettings
from intelliperf.errors import plain_message
from intelliperf.project_archive import ArchiveError
from intelliperf.repository_hosts import repository_url_refusal
from intelliperf.spec_checks import spec_problems
from intelliperf.summary import moves_table
from service.api.archive_checks import ArchiveChecks, CheckerDied, CheckRefused
from service.api.deps import (
    BearerSecret,
    CurrentPrincipal,
    authorized,
    get_db,
    get_settings,
    principal_or_401,
)
from service.api.schemas import JobDetail, JobList, JobSummary, JobTracking
from service.auth import Principal, check_scope
from service.db.models import FINISHED, JOB_STATES, Job
from service.events import event_stream_response
from service.jobs import (
    IdempotencyConflict,
    get_job,
    list_jobs,
    repository_name,
    request_cancel,
    submit,
)
from service.kernel_samples import compare_job_to_base
from service.reproducers import reproducer_download
from service.secrets import SECRET_HEADERS, SecretBox, store_secrets
from service.settings import ServiceSettings

__all__ = ["router"]

router = APIRouter(
    prefix="/v1/jobs", tags=["jobs"], responses={401: {"description": "No bearer token, or an unknown one"}}
)

MAX_SPEC_BYTES = 1 * 2**20
ARCHIVE_RETRY_AFTER_S = 5
UPLOAD_SPEC_LOC = ("body", "spec")
UPLOAD_FIELDS = ("spec", "archive")
JOB_ID = re.compile(r"[0-9a-f]{32}")
# text the databases can store (PostgreSQL refuses NUL) in a query filter
NO_NUL = r"^[^\x00]*$"

_UPLOAD_SCHEMA = {
    "type": "object",
    "required": ["spec", "archive"],
    "additionalProperties": False,
    "properties": {
        "spec": {"type": "string", "description": "The job spec as JSON (schema: JobSpec)"},
        "archive": {"type": "string", "format": "binary", "description": "The project as a tar.gz"},
    },
}


def _invalid(
    field: str, message: str, kind: str = "value_error", where: tuple[str, ...] = ("body",)
) -> HTTPException:
    return HTTPException(
        status.HTTP_422_UNPROCESSABLE_CONTENT,
        [{"loc": [*where, *field.split(".")], "msg": message, "type": kind}],
    )


def _column_length(column: str) -> int:
    length: int = getattr(Job.__table__.c[column].type, "length")  # noqa: B009
    return length


def _parse_spec(raw: bytes | str, *where: str) -> JobSpec:
    try:
        spec = JobSpec.model_validate_json(raw)
    except ValidationError as exc:
        details = [
            {
                "loc": [*where, *(str(p) for p in err["loc"])],
                "msg": plain_message(err["msg"]),
                "type": err["type"],
            }
            for err in exc.errors(include_url=False, include_context=False, include_input=False)
        ]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, details) from None
    problems = spec_problems(json.loads(raw))
    if problems:
        details = [
            {"loc": [*where, *(str(p) for p in loc)], "msg": message, "type": "not_installed"}
            for loc, message in problems
        ]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, details)
    return spec


async def _read_upload(request: Request, settings: ServiceSettings) -> tuple[JobSpec, bytes]:
    try:
        form = await request.form(max_files=4, max_fields=4, max_part_size=MAX_SPEC_BYTES)
    except HTTPException as exc:
        raise HTTPException(status.HTTP_400_BAD_REQUEST, f"malformed multipart body: {exc.detail}") from None
    try:
        for name in dict.fromkeys(form.keys()):
            if name not in UPLOAD_FIELDS:
                raise _invalid(name, "unknown form field; send only 'spec' and 'archive'", "extra_forbidden")
            if len(form.getlist(name)) > 1:
                raise _invalid(name, f"the form field {name!r} is given more than once")
        spec_field, archive_field = form.get("spec"), form.get("archive")
        if not isinstance(spec_field, str):
            raise _invalid("spec", "a form field 'spec' with the job spec as JSON is required", "missing")
        if not isinstance(archive_field, UploadFile):
            raise _invalid(
                "archive", "a file field 'archive' with the project as tar.gz is required", "missing"
            )
        spec = _parse_spec(spec_field, "body", "spec")
        data = await archive_field.read(settings.max_upload_bytes + 1)
        if len(data) > settings.max_upload_bytes:
            raise HTTPException(
                status.HTTP_413_CONTENT_TOO_LARGE,
                f"archive: the upload exceeds the limit of {settings.max_upload_bytes} bytes",
            )
    finally:
        await form.close()
    return spec, data


async def _check_archive(request: Request, data: bytes, principal: Principal) -> None:
    """Every safety rule of the worker's extraction, checked now without unpacking, in a process of the
    archive checks' pool (service.api.archive_checks), so a hostile archive is refused at submit, the
    service's disk never holds an upload's content, and a gzip bomb does not starve other requests."""
    checks: ArchiveChecks = request.app.state.archive_checks
    try:
        await checks.check(data, principal.token_id, principal.name)
    except ArchiveError as exc:
        raise _invalid("archive", str(exc)) from None
    except CheckRefused as exc:
        raise HTTPException(exc.status_code, str(exc), {"Retry-After": str(exc.retry_after_s)}) from None
    except CheckerDied as exc:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), {"Retry-After": str(ARCHIVE_RETRY_AFTER_S)}
        ) from None


def _admissible(
    session: Session,
    request: Request,
    spec: JobSpec,
    principal: Principal,
    with_archive: bool,
    where: tuple[str, ...],
) -> str | None:
    """Every check of a submission that needs no archive, in the order a client meets its refusals (spec,
    then the token's scope, then the fleet): an upload passes them before its archive is decompressed, so a
    caller who would be refused costs no check. Returns the job's repository (owner/name); ``where`` is
    where the spec is in the request, for the refusals' ``loc``."""
    repository = None
    if spec.repository is not None:
        refusal = repository_url_refusal(spec.repository.url, get_settings(request).github_hosts)
        if refusal:
            raise _invalid("repository.url", refusal, where=where)
        repository = repository_name(spec.repository.url)
        if repository is None:
            raise _invalid(
                "repository.url",
                "cannot tell owner/name from this URL (https://host/owner/name.git, names of letters, "
                "digits, '.', '-' and '_', 200 characters at most)",
                where=where,
            )
    if len(spec.gpu.queue) > _column_length("queue"):
        raise _invalid("gpu.arch", f"the GPU queue {spec.gpu.queue[:80]!r}… is too long", where=where)
    if len(spec.applications) > 1:
        raise _invalid(
            "applications",
            f"a job runs one application; this spec has {len(spec.applications)}: submit one job per "
            "application, each with its overrides applied (the IntelliPerf Action does this)",
            where=where,
        )
    if spec.repository is None and not with_archive:
        raise _invalid(
            "repository",
            "a job needs a source: spec.repository (cloned by the worker) or an uploaded archive",
            where=where,
        )
    refusal = check_scope(principal, repository)
    if refusal:
        raise HTTPException(status.HTTP_403_FORBIDDEN, refusal)
    unserved = request.app.state.fleet.refusal(session, spec.gpu.queue, spec.gpu.min_memory_gib)
    if unserved:
        raise _invalid("gpu", unserved, where=where)
    return repository


def _record(
    session: Session,
    request: Request,
    spec: JobSpec,
    repository: str | None,
    archive: bytes | None,
    principal: Principal,
    priority: int,
    idempotency_key: str | None,
    secrets: dict[str, str],
) -> tuple[JobDetail, bool]:
    """Record a job that passed ``_admissible`` (and, with an archive, its check)."""
    try:
        job, created = submit(
            session,
            spec,
            principal=principal,
            repository=repository,
            priority=priority,
            idempotency_key=idempotency_key,
            archive=archive,
        )
    except IdempotencyConflict as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    if created and secrets:
        store_secrets(session, job.id, secrets, _secret_box(get_settings(request)))
    return JobDetail.of(job, spec if created else None), created


def _admissible_upload(request: Request, spec: JobSpec, principal: Principal) -> str | None:
    with get_db(request).session() as session:
        return _admissible(session, request, spec, principal, True, UPLOAD_SPEC_LOC)


def _record_upload(
    request: Request,
    spec: JobSpec,
    repository: str | None,
    archive: bytes,
    principal: Principal,
    priority: int,
    idempotency_key: str | None,
    secrets: dict[str, str],
) -> tuple[JobDetail, bool]:
    with get_db(request).session() as session:
        return _record(
            session, request, spec, repository, archive, principal, priority, idempotency_key, secrets
        )


def _record_json(
    request: Request,
    secret: str,
    refusal: HTTPException | None,
    spec: JobSpec | None,
    priority: int,
    idempotency_key: str | None,
    secrets: dict[str, str],
) -> tuple[JobDetail, bool]:
    """Authenticate and record in one session: the token is checked first, then what the request was
    refused for while it was read (in the order the checks ran before: secrets, size, spec)."""
    with authorized(request, secret) as (session, principal):
        if refusal is not None:
            raise refusal
        assert spec is not None
        repository = _admissible(session, request, spec, principal, False, ("body",))
        return _record(
            session, request, spec, repository, None, principal, priority, idempotency_key, secrets
        )


async def _read_spec_body(request: Request) -> bytes:
    """The body, refused once it exceeds MAX_SPEC_BYTES (so no more than that is held for a caller whose
    token is checked only afterwards)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_SPEC_BYTES:
            raise HTTPException(
                status.HTTP_413_CONTENT_TOO_LARGE, f"the job spec exceeds {MAX_SPEC_BYTES} bytes"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _secret_box(settings: ServiceSettings) -> SecretBox:
    assert settings.secret_key is not None, "checked before the job is recorded"
    return SecretBox(settings.secret_key)


def _secrets(settings: ServiceSettings, github_token: str | None, llm_key: str | None) -> dict[str, str]:
    given = {name: value for name, value in (("github_token", github_token), ("llm_key", llm_key)) if value}
    if given and settings.secret_key is None:
        refusal = "this service keeps no job secrets: its operator has not set INTELLIPERF_SECRET_KEY"
        detail = [
            {"loc": ["header", SECRET_HEADERS[name]], "msg": refusal, "type": "value_error"} for name in given
        ]
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, detail)
    return given


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=JobDetail,
    summary="Submit a job",
    description="A job spec as JSON (the worker clones `spec.repository`), or multipart with `spec` and "
    "the project as a tar.gz `archive`. With an `Idempotency-Key`, a retried submission returns the "
    "first job (200) instead of making a second one.",
    responses={
        200: {"description": "The job this Idempotency-Key made before", "model": JobDetail},
        403: {"description": "The token is not scoped to the repository"},
        409: {"description": "The Idempotency-Key was used with another spec"},
        400: {"description": "A multipart body that cannot be parsed"},
        413: {"description": "The body or archive is too large"},
        415: {"description": "Neither JSON nor multipart"},
        429: {"description": "The token has too many archive checks in progress, or started this minute"},
        503: {"description": "Too many archives wait to be checked, or their check's process died"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/JobSpec"}},
                "multipart/form-data": {"schema": _UPLOAD_SCHEMA},
            },
        }
    },
)
async def submit_job(
    request: Request,
    secret: BearerSecret,
    priority: Annotated[int, Query(ge=0, le=9, description="0 (lowest) to 9 (highest)")] = 5,
    idempotency_key: Annotated[
        str | None, Header(min_length=1, max_length=200, pattern=r"^[\x21-\x7e]+$")
    ] = None,
    x_intelliperf_github_token: Annotated[
        str | None,
        Header(max_length=1000, description="Token the worker clones and opens the pull request with"),
    ] = None,
    x_intelliperf_llm_key: Annotated[
        str | None, Header(max_length=1000, description="The LLM provider's key for this job")
    ] = None,
) -> JSONResponse:
    settings = get_settings(request)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json":
        # the common case in one threadpool hop and one transaction: read and parse on the event loop,
        # then authenticate and record together (a refusal waits until the token has been checked)
        refusal: HTTPException | None = None
        spec: JobSpec | None = None
        secrets: dict[str, str] = {}
        try:
            secrets = _secrets(settings, x_intelliperf_github_token, x_intelliperf_llm_key)
            spec = _parse_spec(await _read_spec_body(request), "body")
        except HTTPException as exc:
            refusal = exc
        detail, created = await run_in_threadpool(
            _record_json, request, secret, refusal, spec, priority, idempotency_key, secrets
        )
    else:
        # an upload is read only for a caller whose token is known, and its archive checked (decompressed)
        # only once everything else about the submission has passed
        principal = await run_in_threadpool(principal_or_401, request, secret)
        secrets = _secrets(settings, x_intelliperf_github_token, x_intelliperf_llm_key)
        if content_type != "multipart/form-data":
            raise HTTPException(
                status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
                "send the job spec as application/json, or multipart/form-data with 'spec' and 'archive'",
            )
        upload, archive = await _read_upload(request, settings)
        repository = await run_in_threadpool(_admissible_upload, request, upload, principal)
        await _check_archive(request, archive, principal)
        detail, created = await run_in_threadpool(
            _record_upload,
            request,
            upload,
            repository,
            archive,
            principal,
            priority,
            idempotency_key,
            secrets,
        )
    if created:
        request.app.state.dispatcher.notify(detail.id)
    return JSONResponse(
        detail.model_dump(mode="json"),
        status_code=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        headers={"Location": detail.links.self, "Idempotent-Replayed": "false" if created else "true"},
    )


@router.get("", response_model=JobList, summary="List jobs, newest first")
def list_all(
    request: Request,
    secret: BearerSecret,
    status_: Annotated[str | None, Query(alias="status", pattern="^(" + "|".join(JOB_STATES) + ")$")] = None,
    repository: Annotated[str | None, Query(max_length=200, pattern=NO_NUL)] = None,
    queue: Annotated[str | None, Query(max_length=64, pattern=NO_NUL)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> Response:
    with authorized(request, secret) as (session, principal):
        page = list_jobs(
            session, principal, status=status_, repository=repository, queue=queue, limit=limit, offset=offset
        )
    jobs = JobList(items=[JobSummary.of(j) for j in page.jobs], total=page.total, limit=limit, offset=offset)
    return _json(jobs)


def _json(model: JobList | JobDetail) -> Response:
    """What FastAPI makes of a route's response model (pydantic's JSON), without validating it again."""
    return Response(model.model_dump_json(), media_type="application/json")


_NOT_FOUND = {404: {"description": "No such job (or not visible to this token)"}}


def _job_or_404(request: Request, principal: Principal, job_id: str) -> Job:
    if not JOB_ID.fullmatch(job_id):  # no job's id (and may be text a database refuses)
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}")
    with get_db(request).session() as session:
        return _visible_job_or_404(session, principal, job_id)


def _visible_job_or_404(session: Session, principal: Principal, job_id: str) -> Job:
    job = get_job(session, job_id, principal) if JOB_ID.fullmatch(job_id) else None
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r}")
    return job


@router.get("/{job_id}", response_model=JobDetail, responses=_NOT_FOUND, summary="One job")
def read_job(request: Request, secret: BearerSecret, job_id: str) -> Response:
    with authorized(request, secret) as (session, principal):
        job = _visible_job_or_404(session, principal, job_id)
    return _json(JobDetail.of(job))


@router.get(
    "/{job_id}/report",
    responses={**_NOT_FOUND, 200: {"description": "The report (schema: `intelliperf schema report`)"}},
    summary="The job's report",
)
def read_report(request: Request, principal: CurrentPrincipal, job_id: str) -> JSONResponse:
    job = _job_or_404(request, principal, job_id)
    if job.report is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} has no report (it is {job.status})")
    return JSONResponse(job.report)


@router.get(
    "/{job_id}/tracking",
    response_model=JobTracking,
    responses={**_NOT_FOUND, 409: {"description": "The job has not finished"}},
    summary="The job's kernel times against the base branch",
    description="For each kernel the finished job measured: its time against the base branch's series "
    "(same repository and device), moved when the 95% interval excludes no change and the change is at "
    "least `min_effect`. Defaults from the job's `track` settings.",
)
def read_tracking(
    request: Request,
    principal: CurrentPrincipal,
    job_id: str,
    base_branch: Annotated[str | None, Query(min_length=1, max_length=200, pattern=r"^[^\x00\s]+$")] = None,
    min_effect: Annotated[float | None, Query(ge=0, le=1)] = None,
) -> JobTracking:
    job = _job_or_404(request, principal, job_id)
    if job.status not in FINISHED:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id} has not finished (it is {job.status})")
    track = JobSpec.model_validate(job.spec).track or TrackSettings()
    branch = base_branch or track.base_branch
    effect = track.min_effect if min_effect is None else min_effect
    with get_db(request).session() as session:
        compared = compare_job_to_base(session, job_id, branch, effect)
    query = urlencode({"repository": job.repository or ""})
    link = f"{str(request.base_url).rstrip('/')}/kernels?{query}" if job.repository else None
    return JobTracking(
        job_id=job_id,
        base_branch=branch,
        min_effect=effect,
        moves=compared.moves,
        not_compared=compared.not_compared,
        comment=moves_table(compared.moves, link),
    )


@router.get(
    "/{job_id}/diff",
    response_class=PlainTextResponse,
    responses={**_NOT_FOUND, 200: {"content": {"text/x-diff": {}}, "description": "Unified diff"}},
    summary="The best rewrite as a unified diff",
)
def read_diff(request: Request, principal: CurrentPrincipal, job_id: str) -> PlainTextResponse:
    job = _job_or_404(request, principal, job_id)
    if not job.diff:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} has no diff (it is {job.status})")
    return PlainTextResponse(job.diff, media_type="text/x-diff")


@router.get(
    "/{job_id}/reproducer",
    response_class=FileResponse,
    responses={
        **_NOT_FOUND,
        200: {
            "content": {"application/gzip": {}},
            "description": "The reproducer folder as a gzipped tar: unpack it and run `intelliperf replay "
            "reproducer`",
        },
    },
    summary="The job's reproducer: its captured launch with both kernels",
)
def read_reproducer(request: Request, principal: CurrentPrincipal, job_id: str) -> FileResponse:
    job = _job_or_404(request, principal, job_id)
    return reproducer_download(get_settings(request).data_dir, job)


@router.post(
    "/{job_id}/cancel",
    response_model=JobDetail,
    status_code=status.HTTP_202_ACCEPTED,
    responses={**_NOT_FOUND, 409: {"description": "The job has finished"}},
    summary="Cancel a job",
)
def cancel_job(request: Request, principal: CurrentPrincipal, job_id: str) -> JobDetail:
    job = _job_or_404(request, principal, job_id)
    if job.status in FINISHED:
        raise HTTPException(status.HTTP_409_CONFLICT, f"job {job_id} has already finished ({job.status})")
    with get_db(request).session() as session:
        job = request_cancel(session, session.merge(job))
        return JobDetail.of(job)


@router.get(
    "/{job_id}/events",
    responses={
        **_NOT_FOUND,
        200: {"content": {"text/event-stream": {}}, "description": "Server-sent events"},
    },
    summary="Stage changes and log lines, live (server-sent events)",
    description="Each event has `id` (resume with `Last-Event-ID` or `?after=`), `event` (state, stage or "
    "log) and JSON `data`. The stream ends with an `end` event once the job has finished; with "
    "`follow=false` it ends after the events recorded so far.",
)
async def stream_events(
    request: Request,
    principal: CurrentPrincipal,
    job_id: str,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    follow: bool = True,
    last_event_id: Annotated[str | None, Header(pattern=r"^[0-9]{1,18}$")] = None,
) -> StreamingResponse:
    await run_in_threadpool(_job_or_404, request, principal, job_id)
    return event_stream_response(
        request,
        get_db(request),
        job_id,
        after=after,
        last_event_id=last_event_id,
        follow=follow,
        poll_s=get_settings(request).events_poll_s,
    )

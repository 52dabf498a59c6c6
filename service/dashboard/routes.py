"""The operators' dashboard: login, the overview at /, a page per job with its live log, report and diff."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Header, HTTPException, Query, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import (
    FileResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)

from service.api.deps import get_db, get_settings, principal_for
from service.auth import Principal
from service.dashboard.render import STATIC, render
from service.dashboard.session import (
    MAX_TOKEN_CHARS,
    DataPrincipal,
    PagePrincipal,
    clear_login,
    remember_login,
    safe_next,
    same_origin,
)
from service.dashboard.views import job_view, kernel_series_view, overview, sampled_repositories
from service.db.models import Job
from service.events import event_stream_response
from service.jobs import get_job
from service.kernel_samples import list_kernels
from service.reproducers import reproducer_download, reproducer_path

__all__ = ["router"]

router = APIRouter(include_in_schema=False)

REFRESH_S = 3
_STATIC_TYPES = {".css": "text/css", ".js": "text/javascript", ".svg": "image/svg+xml"}


@router.get("/login")
def login_page(request: Request, next_: Annotated[str | None, Query(alias="next")] = None) -> Response:
    return render("login.html", next=safe_next(next_), error=None)


@router.post("/login")
def login(
    request: Request,
    token: Annotated[str, Form(max_length=MAX_TOKEN_CHARS)],
    next_: Annotated[str | None, Form(alias="next", max_length=2000)] = None,
) -> Response:
    target = safe_next(next_)
    if not same_origin(request):
        return render("login.html", status.HTTP_403_FORBIDDEN, next=target, error="cross-site login refused")
    secret = token.strip()
    principal = principal_for(get_db(request), get_settings(request), secret) if secret else None
    if principal is None:
        return render(
            "login.html", status.HTTP_401_UNAUTHORIZED, next=target, error="unknown or revoked token"
        )
    response = RedirectResponse(target, status.HTTP_303_SEE_OTHER)
    remember_login(response, request, principal)
    return response


@router.api_route("/logout", methods=["GET", "POST"])
def logout(request: Request) -> Response:
    response = RedirectResponse("/login", status.HTTP_303_SEE_OTHER)
    clear_login(response, request)
    return response


@router.get("/")
def overview_page(
    request: Request,
    principal: PagePrincipal,
    limit: Annotated[int, Query(ge=1, le=200)] = 25,
    part: Literal["body"] | None = None,
) -> Response:
    settings = get_settings(request)
    with get_db(request).session() as session:
        data = overview(session, principal, limit=limit, worker_stale_s=settings.worker_stale_s)
        template = "_overview.html" if part else "overview.html"
        return render(template, principal=principal, view=data, limit=limit, refresh_s=REFRESH_S)


def _job(request: Request, principal: Principal, job_id: str) -> Job:
    with get_db(request).session() as session:
        job = get_job(session, job_id, principal)
    if job is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no job {job_id!r} visible to this login")
    return job


@router.get("/jobs/{job_id}")
def job_page(
    request: Request, principal: PagePrincipal, job_id: str, part: Literal["live"] | None = None
) -> Response:
    with get_db(request).session() as session:
        view = job_view(session, principal, job_id)
        if view is None:
            return render("missing.html", status.HTTP_404_NOT_FOUND, principal=principal, job_id=job_id)
        template = "_job.html" if part else "job.html"
        kept = reproducer_path(get_settings(request).data_dir, view.job.id)
        reproducer = kept.stat().st_size if kept.is_file() else None
        return render(
            template, principal=principal, view=view, job=view.job, report=view.report, reproducer=reproducer
        )


@router.get("/kernels")
def kernels_page(
    request: Request,
    principal: PagePrincipal,
    repository: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    if repository is None:
        with get_db(request).session() as session:
            rows = sampled_repositories(session, principal)
        return render("repositories.html", principal=principal, rows=rows)
    if not principal.may_access(repository):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"this login may not read {repository}")
    with get_db(request).session() as session:
        page = list_kernels(session, repository, limit=500, offset=0)
    return render("kernels.html", principal=principal, repository=repository, page=page)


@router.get("/kernels/series")
def kernel_series_page(
    request: Request,
    principal: PagePrincipal,
    repository: Annotated[str, Query(max_length=200)],
    kernel: Annotated[str, Query(min_length=1, max_length=2000)],
    device: Annotated[str | None, Query(max_length=500)] = None,
    ref: Annotated[str | None, Query(max_length=200)] = None,
) -> Response:
    if not principal.may_access(repository):
        raise HTTPException(status.HTTP_403_FORBIDDEN, f"this login may not read {repository}")
    with get_db(request).session() as session:
        view = kernel_series_view(session, repository, kernel, device or None, ref or None)
    return render("kernel.html", principal=principal, view=view)


@router.get("/jobs/{job_id}/events")
async def job_events(
    request: Request,
    principal: DataPrincipal,
    job_id: str,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    last_event_id: Annotated[str | None, Header(pattern=r"^[0-9]{1,18}$")] = None,
) -> StreamingResponse:
    """The job's events as server-sent events, from the stream the API serves."""
    await run_in_threadpool(_job, request, principal, job_id)
    return event_stream_response(
        request,
        get_db(request),
        job_id,
        after=after,
        last_event_id=last_event_id,
        follow=True,
        poll_s=get_settings(request).events_poll_s,
    )


@router.get("/jobs/{job_id}/report.json")
def job_report(request: Request, principal: DataPrincipal, job_id: str) -> JSONResponse:
    job = _job(request, principal, job_id)
    if job.report is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} has no report (it is {job.status})")
    disposition = f'attachment; filename="intelliperf-{job.id}.json"'
    return JSONResponse(job.report, headers={"Content-Disposition": disposition})


@router.get("/jobs/{job_id}/diff.txt")
def job_diff(request: Request, principal: DataPrincipal, job_id: str) -> PlainTextResponse:
    job = _job(request, principal, job_id)
    if not job.diff:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} has no diff (it is {job.status})")
    headers = {"Content-Disposition": f'attachment; filename="intelliperf-{job.id}.diff"'}
    return PlainTextResponse(job.diff, media_type="text/x-diff", headers=headers)


@router.get("/jobs/{job_id}/reproducer.tar.gz")
def job_reproducer(request: Request, principal: DataPrincipal, job_id: str) -> FileResponse:
    job = _job(request, principal, job_id)
    return reproducer_download(get_settings(request).data_dir, job)


@router.get("/static/dashboard/{name}")
def static_file(name: str) -> FileResponse:
    """The stylesheet and script; only files of the static folder, by exact name."""
    files = {path.name: path for path in STATIC.iterdir() if path.suffix in _STATIC_TYPES}
    if name not in files:
        raise HTTPException(status.HTTP_404_NOT_FOUND, "no such file")
    path = files[name]
    return FileResponse(
        path,
        media_type=_STATIC_TYPES[path.suffix],
        headers={"Cache-Control": "public, max-age=86400", "X-Content-Type-Options": "nosniff"},
    )

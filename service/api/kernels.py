"""/v1/kernels: the time series of each kernel's time in a repository, one sample per finished job
(service.kernel_samples)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request, status

from service.api.deps import BearerSecret, authorized
from service.api.schemas import KernelList, KernelOut, KernelSampleOut, KernelSeries
from service.auth import Principal, check_scope
from service.db.models import KERNEL_NAME_LENGTH, KernelSample
from service.kernel_samples import kernel_series, list_kernels, series_change_points

__all__ = ["router"]

router = APIRouter(
    prefix="/v1/kernels",
    tags=["kernels"],
    responses={
        401: {"description": "No bearer token, or an unknown one"},
        403: {"description": "The token is not scoped to the repository"},
        404: {"description": "Nothing sampled matches"},
    },
)

# owner/name as service.jobs.repository_name gives it
Repository = Annotated[
    str,
    Query(
        max_length=200,
        pattern=r"^[\w.-]{1,100}/[\w.-]{1,100}$",
        description="owner/name, as the jobs' repository URL names it",
        examples=["acme/kernels"],
    ),
]
NO_NUL = r"^[^\x00]*$"  # text the databases can store (PostgreSQL refuses NUL)


def sample_out(sample: KernelSample, with_launches: bool) -> KernelSampleOut:
    """One sample for the API; its ``launch_ns`` only ``with_launches`` (the series reads it only then)."""
    fields = {name: getattr(sample, name) for name in KernelSampleOut.model_fields if name != "launch_ns"}
    return KernelSampleOut(**fields, launch_ns=sample.launch_ns if with_launches else None)


def _may_read(principal: Principal, repository: str) -> None:
    """403 for a token not scoped to ``repository``: the answer depends on the token alone, so it tells
    nothing of what is stored."""
    refusal = check_scope(principal, repository)
    if refusal:
        raise HTTPException(status.HTTP_403_FORBIDDEN, refusal)


@router.get("", response_model=KernelList, summary="The kernels sampled in a repository")
def list_repository_kernels(
    request: Request,
    secret: BearerSecret,
    repository: Repository,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> KernelList:
    with authorized(request, secret) as (session, principal):
        _may_read(principal, repository)
        page = list_kernels(session, repository, limit=limit, offset=offset)
    if page.total == 0:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"no kernel samples for repository {repository}")
    items = [KernelOut.model_validate(row) for row in page.items]
    return KernelList(repository=repository, items=items, total=page.total, limit=limit, offset=offset)


@router.get(
    "/series",
    response_model=KernelSeries,
    summary="One kernel's samples in a repository, oldest first",
    description="The newest `limit` samples of the kernel (by its mangled name), on `device` if given, in "
    "the order their jobs finished.",
)
def read_series(
    request: Request,
    secret: BearerSecret,
    repository: Repository,
    kernel: Annotated[
        str,
        Query(min_length=1, max_length=KERNEL_NAME_LENGTH, pattern=NO_NUL, description="Mangled name"),
    ],
    device: Annotated[
        str | None, Query(min_length=1, max_length=500, pattern=NO_NUL, description="The report's device")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=5000)] = 500,
    ref: Annotated[
        str | None, Query(min_length=1, max_length=200, pattern=NO_NUL, description="One branch (or tag)")
    ] = None,
    launches: Annotated[
        bool,
        Query(
            description="Include each sample's launch durations (`launch_ns`, up to 256 numbers a sample); "
            "without it `launch_ns` is null and a series of 5,000 samples stays small"
        ),
    ] = False,
) -> KernelSeries:
    with authorized(request, secret) as (session, principal):
        _may_read(principal, repository)
        page = kernel_series(
            session, repository, kernel, device, limit=limit, ref=ref, with_launches=launches
        )
        items = [sample_out(sample, launches) for sample in page.samples]
        changes, note = series_change_points(page.samples) if page.samples else ([], None)
    if page.total == 0:
        on = f" on device {device!r}" if device is not None else ""
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"no samples of kernel {kernel[:200]!r} in repository {repository}{on}"
        )
    return KernelSeries(
        repository=repository,
        kernel=kernel,
        device=device,
        items=items,
        total=page.total,
        limit=limit,
        change_points=changes,
        change_points_note=note,
    )

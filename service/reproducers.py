"""Where the service keeps each job's reproducer: ``<data_dir>/reproducers/<job id>.tar.gz``, a gzipped tar
of the folder `intelliperf replay` runs (accordo.reproducer). A worker stores it while it holds the job
(PUT /v1/worker/jobs/{id}/reproducer), so that a reproducer too large for the pull request still reaches
its user (GET /v1/jobs/{id}/reproducer); it is written to a temporary name and renamed, so a reader never
sees half of one, and one larger than ``max_reproducer_bytes`` is refused before it fills the disk."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

from fastapi import HTTPException, status
from fastapi.responses import FileResponse

from service.db.models import Job

__all__ = ["ReproducerTooLarge", "reproducer_download", "reproducer_path", "store_reproducer"]


class ReproducerTooLarge(ValueError):
    """The upload passed the service's limit."""


def reproducer_path(data_dir: Path, job_id: str) -> Path:
    return data_dir / "reproducers" / f"{job_id}.tar.gz"


async def store_reproducer(data_dir: Path, job_id: str, chunks: AsyncIterator[bytes], limit: int) -> int:
    """Write ``chunks`` as the job's reproducer, replacing an earlier one; its size in bytes. Raises
    ReproducerTooLarge (keeping nothing) once more than ``limit`` bytes came."""
    target = reproducer_path(data_dir, job_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{job_id}.{uuid.uuid4().hex}.part")
    size = 0
    try:
        with partial.open("wb") as out:
            async for chunk in chunks:
                size += len(chunk)
                if size > limit:
                    raise ReproducerTooLarge(f"the reproducer is over the service's {limit} bytes")
                out.write(chunk)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return size


def reproducer_download(data_dir: Path, job: Job) -> FileResponse:
    """The job's reproducer as a download (the API's and the dashboard's); 404 when it has none."""
    path = reproducer_path(data_dir, job.id)
    if not path.is_file():
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"job {job.id} has no reproducer (it is {job.status})")
    return FileResponse(
        path, media_type="application/gzip", filename=f"intelliperf-reproducer-{job.id}.tar.gz"
    )

"""A regression on the base branch answered with a fix: when a tracking job on its own base branch shows
that a kernel's time moved up (a change point, at least ``min_effect`` slower), the service queues an
optimization job on that kernel at the newest commit, with a pull request whose body names the commit
that made it slower.

One fix job per regression (repository, kernel, device, regressing commit): its idempotency key says so,
so the later commits that confirm the same change point find the job already queued. The fix job runs
as the tracking job's token (same scope) with the tracking job's own secrets (the GitHub token and the LLM
key, copied as ciphertext before the tracking job's are deleted) and, for an uploaded project, its
archive.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from intelliperf.contract import JobSpec
from intelliperf.tracking.changepoints import ChangePoint
from service.auth import ADMIN, Principal
from service.db.models import ApiToken, Job, JobArchive, JobSecret, KernelSample
from service.jobs import add_event, submit
from service.kernel_samples import branch_series, series_change_points

__all__ = ["open_fix_jobs"]


def _principal(session: Session, job: Job) -> Principal | None:
    """Who the tracking job ran as; None when its token is gone (no fix job is queued for it then)."""
    if job.token_id is None:
        return ADMIN
    token = session.get(ApiToken, job.token_id)
    if token is None:
        return None
    return Principal(token_id=token.id, name=token.name, repositories=tuple(token.repositories))


def _regression(
    session: Session, sample: KernelSample, base_branch: str, min_effect: float
) -> ChangePoint | None:
    """The series' newest change point when it is a slowdown of at least ``min_effect``."""
    series = branch_series(session, sample, base_branch)
    changes, _ = series_change_points(series)
    if not changes:
        return None
    newest = changes[-1]
    return newest if newest.change >= min_effect and newest.low > 0 else None


def _fix_spec(spec: JobSpec, sample: KernelSample, change: ChangePoint, base_branch: str) -> JobSpec:
    name = sample.demangled or sample.kernel
    note = (
        f"IntelliPerf's tracking found `{name}` {change.change:+.1%} slower (95% interval "
        f"{change.low:+.1%} to {change.high:+.1%}) from commit {change.commit} on `{base_branch}`"
        + (f" ({sample.device})" if sample.device else "")
        + "; this pull request proposes a fix."
    )
    pull_request = spec.pull_request.model_copy(
        update={"create_pr": True, "base_branch": base_branch, "note": note}
    )
    return spec.model_copy(
        update={
            "formula": "auto",
            "kernel": f"^{re.escape(sample.kernel)}$",
            "track": None,
            "pull_request": pull_request,
        }
    )


def open_fix_jobs(session: Session, job: Job) -> list[str]:
    """For a finished tracking job on its own base branch: queue a fix job for each of its kernels whose
    series just showed a slowdown; the ids of the jobs queued (or found queued before)."""
    spec = JobSpec.model_validate(job.spec)
    track = spec.track
    if track is None or spec.repository is None or job.repository is None:
        return []
    if spec.repository.ref != track.base_branch:
        return []  # a pull request's job: compared in /tracking, never answered with a fix job
    samples = list(session.scalars(select(KernelSample).where(KernelSample.job_id == job.id)))
    opened: list[str] = []
    for sample in samples:
        change = _regression(session, sample, track.base_branch, track.min_effect)
        if change is None:
            continue
        principal = _principal(session, job)
        if principal is None:
            add_event(
                session, job.id, "log", f"regression in {sample.kernel} at {change.commit}: its token is gone"
            )
            continue
        key_source = f"{job.repository}\0{sample.kernel}\0{sample.device}\0{change.commit}"
        key = "regression:" + hashlib.sha256(key_source.encode()).hexdigest()[:40]
        archive = session.get(JobArchive, job.id)
        fix, created = submit(
            session,
            _fix_spec(spec, sample, change, track.base_branch),
            principal=principal,
            repository=job.repository,
            priority=job.priority,
            idempotency_key=key,
            archive=archive.data if archive is not None else None,
        )
        if created:
            _copy_secrets(session, job.id, fix.id)
            name = sample.demangled or sample.kernel
            what = f"{name}: {change.change:+.1%} slower from commit {change.commit}; fix job {fix.id} queued"
            add_event(session, job.id, "log", what)
        opened.append(fix.id)
    return opened


def _copy_secrets(session: Session, source: str, target: str) -> None:
    rows: list[Any] = list(session.scalars(select(JobSecret).where(JobSecret.job_id == source)))
    for row in rows:
        session.add(JobSecret(job_id=target, name=row.name, ciphertext=row.ciphertext))

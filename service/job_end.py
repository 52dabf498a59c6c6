"""A job's end: its state, outcome and report recorded, its kernels' samples kept (service.kernel_samples),
the regressions a tracking job revealed answered with fix jobs (service.regressions), its secrets and
deliveries forgotten, and the event that says so.

Apart from service.jobs because answering a regression submits jobs: service.regressions stands on
service.jobs, and this module on both, so that no module of the service imports one that imports it.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from service.db.models import FINISHED, Job, utcnow
from service.deliveries import forget_deliveries
from service.jobs import add_event
from service.kernel_samples import record_samples
from service.regressions import open_fix_jobs
from service.secrets import delete_secrets

log = logging.getLogger(__name__)

__all__ = ["finish"]


def finish(
    session: Session,
    job_id: str,
    *,
    status: str,
    outcome: str,
    error: str | None = None,
    report: dict[str, Any] | None = None,
    diff: str | None = None,
    summary: str | None = None,
    speedup: float | None = None,
    pr_url: str | None = None,
) -> None:
    """Record a job's end; with a report, also its kernels' samples (service.kernel_samples), in the
    caller's transaction."""
    if status not in FINISHED:
        raise ValueError(f"{status!r} is not a finished state")
    now = utcnow()
    session.execute(
        update(Job)
        .where(Job.id == job_id)
        .values(
            status=status,
            outcome=outcome,
            error=error,
            report=report,
            diff=diff,
            summary=summary,
            speedup=speedup,
            pr_url=pr_url,
            finished_at=now,
        )
    )
    if report is not None:
        job = session.get(Job, job_id)  # the caller has usually loaded it: no query then
        if job is not None:
            record_samples(session, job_id, repository=job.repository, spec=job.spec, report=report, now=now)
            if status == "succeeded" and job.spec.get("track"):
                _answer_regressions(session, job)  # before the secrets go: a fix job gets copies
    delete_secrets(session, job_id)
    forget_deliveries(session, job_id)
    message = f"{status}: {outcome}" + (f" ({error.splitlines()[0]})" if error else "")
    add_event(session, job_id, "state", message, stage=status)


def _answer_regressions(session: Session, job: Job) -> None:
    """Fix jobs for the regressions a tracking job revealed; a failure costs those, never the job's end."""
    try:
        with session.begin_nested():
            open_fix_jobs(session, job)
    except Exception:
        log.exception("job %s: answering its regressions failed; its end is recorded", job.id)

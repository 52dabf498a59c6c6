"""What the dashboard shows, read from the database with the same visibility rules as the API."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from markupsafe import Markup
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from intelliperf.contract import Report
from intelliperf.tracking.changepoints import ChangePoint
from service.api.schemas import WorkerOut
from service.auth import Principal
from service.dashboard.chart import ChangeMark, ChartPoint, series_svg
from service.dashboard.render import nanoseconds
from service.db.models import FINISHED, JOB_STATES, Job, JobEvent, KernelSample, utcnow
from service.fleet import Fleet, worker_rows
from service.jobs import get_job, list_jobs
from service.kernel_samples import commit_times, kernel_series, series_change_points

__all__ = ["JobView", "Overview", "QueueRow", "job_view", "overview"]

LOG_LINES = 1000


@dataclass(frozen=True)
class QueueRow:
    name: str
    queued: int
    running: int
    workers_alive: int
    workers_lost: int


@dataclass(frozen=True)
class Overview:
    now: datetime
    counts: dict[str, int]
    running: list[Job]
    queued: list[Job]
    finished: list[Job]
    finished_total: int
    queues: list[QueueRow]
    workers: list[WorkerOut]
    unserved: frozenset[str]  # queues no live worker consumes: their queued jobs wait


def overview(session: Session, principal: Principal, *, limit: int, worker_stale_s: float) -> Overview:
    pages = {state: list_jobs(session, principal, status=state, limit=limit) for state in JOB_STATES}
    finished = sorted(
        (job for state in FINISHED for job in pages[state].jobs),
        key=lambda job: job.finished_at or job.created_at,
        reverse=True,
    )[:limit]
    rows = worker_rows(session, principal, worker_stale_s)
    return Overview(
        now=utcnow(),
        counts={state: page.total for state, page in pages.items()},
        running=pages["running"].jobs,
        queued=pages["queued"].jobs,
        finished=finished,
        finished_total=sum(pages[state].total for state in FINISHED),
        queues=_queues(session, rows),
        workers=rows,
        unserved=frozenset(job.queue for job in pages["queued"].jobs)
        - Fleet.of((row.queues, row.alive) for row in rows).live,
    )


def _queues(session: Session, workers: list[WorkerOut]) -> list[QueueRow]:
    """Depth per GPU queue over every job (the same numbers as /metrics), and who serves each queue."""
    counts = session.execute(
        select(Job.queue, Job.status, func.count())
        .where(Job.status.in_(("queued", "running")))
        .group_by(Job.queue, Job.status)
    ).all()
    by_queue: dict[str, dict[str, int]] = {}
    for queue, state, count in counts:
        by_queue.setdefault(queue, {})[state] = count
    for worker in workers:
        for queue in worker.queues:
            by_queue.setdefault(queue, {})
    return [
        QueueRow(
            name=name,
            queued=states.get("queued", 0),
            running=states.get("running", 0),
            workers_alive=sum(1 for w in workers if name in w.queues and w.alive),
            workers_lost=sum(1 for w in workers if name in w.queues and not w.alive),
        )
        for name, states in sorted(by_queue.items())
    ]


@dataclass(frozen=True)
class LogLine:
    id: int
    at: datetime
    kind: str
    stage: str | None
    message: str


@dataclass
class JobView:
    job: Job
    now: datetime
    log: list[LogLine]
    log_omitted: int
    last_event_id: int
    report: Report | None = None
    report_error: str | None = None
    raw_report: dict[str, Any] | None = field(default=None)


def job_view(session: Session, principal: Principal, job_id: str) -> JobView | None:
    job = get_job(session, job_id, principal)
    if job is None:
        return None
    recent = list(
        session.scalars(
            select(JobEvent).where(JobEvent.job_id == job.id).order_by(JobEvent.id.desc()).limit(LOG_LINES)
        )
    )
    total = session.scalar(select(func.count()).where(JobEvent.job_id == job.id)) or 0
    log = [LogLine(e.id, e.created_at, e.kind, e.stage, e.message) for e in reversed(recent)]
    view = JobView(
        job=job,
        now=utcnow(),
        log=log,
        log_omitted=max(0, total - len(log)),
        last_event_id=log[-1].id if log else 0,
    )
    if job.report is not None:
        try:
            view.report = Report.model_validate(job.report)
        except ValidationError as exc:
            errors = exc.error_count()
            view.report_error = f"the report does not match this version's schema ({errors} errors)"
            view.raw_report = job.report
    return view


@dataclass(frozen=True)
class KernelSeriesView:
    repository: str
    kernel: str
    device: str | None
    demangled: str | None
    samples: list[KernelSample]
    total: int
    chart: Markup
    change_points: list[ChangePoint]
    note: str | None


def kernel_series_view(
    session: Session, repository: str, kernel: str, device: str | None, ref: str | None = None
) -> KernelSeriesView:
    """A kernel's series page: its samples (the newest 500), the chart and the change points in them."""
    page = kernel_series(session, repository, kernel, device, limit=500, ref=ref)
    samples = list(page.samples)
    changes, note = series_change_points(samples) if samples else ([], None)
    grouped = commit_times(samples)
    points = [
        ChartPoint(
            label=c.commit[:7],
            value_ns=sum(c.samples) / len(c.samples),
            title=f"{c.commit}: {nanoseconds(sum(c.samples) / len(c.samples))} ({len(c.samples)} job(s))",
        )
        for c in grouped
    ]
    marks = [
        ChangeMark(change.index, f"{change.change:+.0%} ({change.low:+.0%} to {change.high:+.0%})")
        for change in changes
    ]
    return KernelSeriesView(
        repository=repository,
        kernel=kernel,
        device=device,
        demangled=samples[-1].demangled if samples else None,
        samples=samples,
        total=page.total,
        chart=series_svg(points, marks),
        change_points=changes,
        note=note,
    )


def sampled_repositories(session: Session, principal: Principal) -> list[tuple[str, int, datetime]]:
    """The repositories this principal may see that have kernel samples: the name, how many kernels, the
    newest sample's time."""
    rows = session.execute(
        select(
            KernelSample.repository,
            func.count(func.distinct(KernelSample.kernel)),
            func.max(KernelSample.created_at),
        )
        .where(KernelSample.repository.is_not(None))
        .group_by(KernelSample.repository)
        .order_by(KernelSample.repository)
    ).all()
    return [(str(name), int(kernels), newest) for name, kernels, newest in rows if principal.may_access(name)]

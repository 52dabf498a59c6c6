"""What operators and their tools poll: workers, health, readiness, Prometheus metrics."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import (
    CollectorRegistry,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector
from sqlalchemy import func, select, text

from service.api.deps import CurrentPrincipal, get_db, get_settings
from service.api.schemas import WorkerOut
from service.db.models import FINISHED, JOB_STATES, Job, Worker, utcnow
from service.db.session import Database
from service.fleet import worker_rows

__all__ = ["JobMetrics", "router"]

router = APIRouter(tags=["operations"])

DURATION_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0, 14400.0)


@router.get(
    "/v1/workers",
    response_model=list[WorkerOut],
    responses={401: {"description": "No bearer token, or an unknown one"}},
    summary="Workers, their GPU and current job",
)
def list_workers(request: Request, principal: CurrentPrincipal) -> list[WorkerOut]:
    """Every worker; its current job's id only to a token that may see that job's repository."""
    with get_db(request).session() as session:
        return worker_rows(session, principal, get_settings(request).worker_stale_s)


@router.get("/healthz", summary="The process is up")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="The database and the broker answer")
def readyz(request: Request) -> JSONResponse:
    checks: dict[str, str] = {}
    try:
        with get_db(request).session() as session:
            session.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"{type(exc).__name__}: {exc}"
    try:
        with request.app.state.celery.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"{type(exc).__name__}: {exc}"
    ready = all(value == "ok" for value in checks.values())
    code = status.HTTP_200_OK if ready else status.HTTP_503_SERVICE_UNAVAILABLE
    return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, status_code=code)


class JobMetrics(Collector):
    """Read from the database at scrape time, so every API process reports the same truth."""

    def __init__(self, db: Database, worker_stale_s: float) -> None:
        self.db = db
        self.worker_stale_s = worker_stale_s

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily]:
        with self.db.session() as session:
            by_state = dict(session.execute(select(Job.status, func.count()).group_by(Job.status)).all())
            depth = session.execute(
                select(Job.queue, func.count()).where(Job.status == "queued").group_by(Job.queue)
            )
            outcomes = session.execute(
                select(Job.outcome, func.count()).where(Job.status.in_(FINISHED)).group_by(Job.outcome)
            )
            spans = session.execute(
                select(Job.started_at, Job.finished_at).where(
                    Job.status.in_(FINISHED), Job.started_at.is_not(None), Job.finished_at.is_not(None)
                )
            )
            durations = [(end - start).total_seconds() for start, end in spans]
            stale = utcnow() - timedelta(seconds=self.worker_stale_s)
            workers = session.execute(select(Worker.last_heartbeat, Worker.current_job)).all()

        jobs = GaugeMetricFamily("intelliperf_jobs", "Jobs by state", labels=["state"])
        for state in JOB_STATES:
            jobs.add_metric([state], by_state.get(state, 0))
        yield jobs
        queue_depth = GaugeMetricFamily(
            "intelliperf_queue_depth", "Queued jobs per GPU queue", labels=["queue"]
        )
        for queue, count in depth:
            queue_depth.add_metric([queue], count)
        yield queue_depth
        finished = CounterMetricFamily(
            "intelliperf_job_outcomes", "Finished jobs by outcome", labels=["outcome"]
        )
        for outcome, count in outcomes:
            finished.add_metric([outcome or "unknown"], count)
        yield finished
        buckets = [(str(bound), sum(d <= bound for d in durations)) for bound in DURATION_BUCKETS]
        buckets.append(("+Inf", len(durations)))
        yield HistogramMetricFamily(
            "intelliperf_job_duration_seconds",
            "Run time of finished jobs, start to finish",
            buckets=buckets,
            sum_value=sum(durations),
        )
        alive = GaugeMetricFamily("intelliperf_workers", "Workers by liveness and activity", labels=["state"])
        alive.add_metric(["busy"], sum(1 for beat, job in workers if beat >= stale and job))
        alive.add_metric(["idle"], sum(1 for beat, job in workers if beat >= stale and not job))
        alive.add_metric(["lost"], sum(1 for beat, _ in workers if beat < stale))
        yield alive


@router.get(
    "/metrics",
    summary="Prometheus metrics (the admin token)",
    response_class=Response,
    responses={
        401: {"description": "No bearer token, or an unknown one"},
        403: {"description": "Not the admin token: the metrics count every repository's jobs"},
    },
)
def metrics(request: Request, principal: CurrentPrincipal) -> Response:
    """Fleet-wide counts, so only for the admin token (Prometheus: `authorization: {credentials: ...}`)."""
    if not principal.is_admin:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "the metrics are for the admin token")
    registry: CollectorRegistry = request.app.state.metrics_registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

"""/healthz, /readyz and /metrics over a real server, on SQLite and PostgreSQL: readiness names what is
down, and the Prometheus metrics count the jobs and workers that are really in the database."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from service.auth import create_token
from service.db.models import Job, Worker, utcnow
from service.db.session import Database
from service.job_end import finish
from service.jobs import claim
from service.settings import ServiceSettings
from tests.service.conftest import LiveService, serve

SPEC = {"repository": {"url": "https://github.com/acme/kernels.git"}, "applications": [{"command": "./app"}]}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(live: LiveService) -> Samples:
    with live.client() as client:  # Prometheus scrapes with the admin token
        response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def test_healthz_and_readyz_answer_when_everything_is_up(
    settings_for: Callable[..., ServiceSettings], database_url: str, redis_url: str
) -> None:
    with serve(settings_for(database_url, broker_url=redis_url)) as live, live.client(None) as client:
        response = client.get("/healthz")
        assert (response.status_code, response.json()) == (200, {"status": "ok"})
        response = client.get("/readyz")
        assert response.status_code == 200, response.text
        assert response.json() == {"status": "ready", "checks": {"database": "ok", "broker": "ok"}}


def test_readyz_is_503_naming_the_broker_when_it_is_down(
    settings_for: Callable[..., ServiceSettings], database_url: str
) -> None:
    settings = settings_for(database_url, broker_url="redis://127.0.0.1:1/0")
    with serve(settings, dispatch=False) as live, live.client(None) as client:
        started = time.monotonic()
        response = client.get("/readyz")
        elapsed = time.monotonic() - started
        assert response.status_code == 503, response.text
        body = response.json()
        assert body["status"] == "not ready"
        assert body["checks"]["database"] == "ok"
        assert body["checks"]["broker"] != "ok"
        assert "Connection refused" in body["checks"]["broker"] or "111" in body["checks"]["broker"]
        assert elapsed < 10, "a readiness probe must answer quickly even when the broker is down"
        assert client.get("/healthz").status_code == 200  # alive, only not ready


def test_metrics_count_the_jobs_and_workers_in_the_database(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database
) -> None:
    # no dispatcher, and a generous staleness, so that nothing but this test changes the jobs' states
    with serve(settings_for(database_url, worker_stale_s=600), dispatch=False) as live:
        _count_jobs_and_workers(live, db)


def _count_jobs_and_workers(live: LiveService, db: Database) -> None:
    before = scrape(live)
    assert before[("intelliperf_jobs", (("state", "queued"),))] == 0
    assert before[("intelliperf_job_duration_seconds_count", ())] == 0
    assert not any(name == "intelliperf_queue_depth" for name, _ in before)

    with live.client() as client:
        ids = [client.post("/v1/jobs", json=SPEC).json()["id"] for _ in range(5)]
        ids += [
            client.post("/v1/jobs", json={**SPEC, "gpu": {"arch": "sm_90"}}).json()["id"] for _ in range(2)
        ]
        assert client.post(f"/v1/jobs/{ids[4]}/cancel").status_code == 202
    now = utcnow()
    with db.session() as session:
        # ids[0] succeeded after 45 s, ids[1] failed after 400 s, ids[2] is running, ids[3] queued
        for job_id, status, outcome, seconds in (
            (ids[0], "succeeded", "success", 45),
            (ids[1], "failed", "build_failed", 400),
        ):
            assert claim(session, job_id, "w-busy") is not None
            finish(session, job_id, status=status, outcome=outcome)
            session.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(started_at=now - timedelta(seconds=seconds), finished_at=now)
            )
        assert claim(session, ids[2], "w-busy") is not None
        session.add_all(
            [
                Worker(
                    name="w-busy",
                    hostname="h",
                    queues=["gpu.nvidia.any"],
                    current_job=ids[2],
                    last_heartbeat=now,
                ),
                Worker(name="w-idle", hostname="h", queues=["gpu.nvidia.sm90"], last_heartbeat=now),
                Worker(
                    name="w-lost",
                    hostname="h",
                    queues=["gpu.nvidia.any"],
                    last_heartbeat=now - timedelta(hours=1),
                ),
            ]
        )

    metrics = scrape(live)

    def value(name: str, **labels: str) -> float:
        return metrics[(name, tuple(sorted(labels.items())))]

    assert {
        state: value("intelliperf_jobs", state=state)
        for state in ("queued", "running", "succeeded", "failed", "cancelled")
    } == {
        "queued": 3,  # ids[3] on any, ids[5] and ids[6] on sm90
        "running": 1,
        "succeeded": 1,
        "failed": 1,
        "cancelled": 1,
    }
    assert value("intelliperf_queue_depth", queue="gpu.nvidia.any") == 1
    assert value("intelliperf_queue_depth", queue="gpu.nvidia.sm90") == 2
    assert value("intelliperf_job_outcomes_total", outcome="success") == 1
    assert value("intelliperf_job_outcomes_total", outcome="build_failed") == 1
    assert value("intelliperf_job_outcomes_total", outcome="cancelled") == 1
    # the cancelled job never started: only the two that ran have a duration
    assert value("intelliperf_job_duration_seconds_count") == 2
    assert abs(value("intelliperf_job_duration_seconds_sum") - 445) < 1e-3
    assert value("intelliperf_job_duration_seconds_bucket", le="30.0") == 0
    assert value("intelliperf_job_duration_seconds_bucket", le="60.0") == 1
    assert value("intelliperf_job_duration_seconds_bucket", le="300.0") == 1
    assert value("intelliperf_job_duration_seconds_bucket", le="600.0") == 2
    assert value("intelliperf_job_duration_seconds_bucket", le="+Inf") == 2
    assert value("intelliperf_workers", state="busy") == 1
    assert value("intelliperf_workers", state="idle") == 1
    assert value("intelliperf_workers", state="lost") == 1


def test_metrics_are_for_the_admin_token_only(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database
) -> None:
    """They count every repository's jobs: a repository-scoped token may not read them, nor may anyone
    without a token."""
    with db.session() as session:
        _, scoped = create_token(session, "acme-ci", ["acme/*"])
    with serve(settings_for(database_url), dispatch=False) as live:
        with live.client(None) as client:
            anonymous = client.get("/metrics")
        with live.client(scoped) as client:
            repository_scoped = client.get("/metrics")
        assert scrape(live)  # the admin token
    assert anonymous.status_code == 401
    assert repository_scoped.status_code == 403 and "admin token" in repository_scoped.text

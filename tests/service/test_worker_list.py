"""The worker list names a worker's current job only to a token that may see that job's repository; that it
is busy, to every token (the API and the dashboard share service.fleet.worker_rows)."""

from __future__ import annotations

from service.auth import create_token
from service.db.models import Worker
from service.db.session import Database
from tests.service.conftest import LiveService
from tests.service.test_dashboard import spec


def test_a_scoped_token_sees_the_workers_but_not_others_jobs(live: LiveService) -> None:
    with live.client() as admin:
        job_id = admin.post("/v1/jobs", json=spec("acme/kernels")).json()["id"]
    database = Database(live.settings.resolved_database_url)
    with database.session() as session:
        session.add(Worker(name="w-busy", hostname="h", queues=["gpu.nvidia.any"], current_job=job_id))
        _, other = create_token(session, "other", ["other/*"])
        _, owner = create_token(session, "owner", ["acme/*"])
    database.dispose()
    seen = {}
    for name, token in (("other", other), ("owner", owner), ("admin", None)):
        with live.client(token) if token else live.client() as client:
            (worker,) = client.get("/v1/workers").json()
            seen[name] = (worker["current_job"], worker["busy"])
    assert seen == {"other": (None, True), "owner": (job_id, True), "admin": (job_id, True)}

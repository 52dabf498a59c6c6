"""A database that stops taking connections (PostgreSQL told to refuse them, its sessions ended, for
real): the API answers 503 with Retry-After as JSON, not a plain-text 500, and serves again once the
database is back, without a restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import create_engine, text

from service.db.migrate import upgrade
from service.settings import ServiceSettings
from tests.service.conftest import PG_ADMIN_URL, serve
from tests.service.test_dashboard import spec


@contextmanager
def outage(database_url: str) -> Iterator[None]:
    name = database_url.rsplit("/", 1)[1]
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            connection.execute(
                text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"),
                {"name": name},
            )
        yield
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_database_outage_is_a_503_with_retry_after_and_passes(settings: ServiceSettings) -> None:
    upgrade(settings.resolved_database_url)
    with serve(settings, dispatch=False) as live, live.client() as client:
        assert client.post("/v1/jobs", json=spec("acme/kernels")).status_code == 201
        with outage(settings.resolved_database_url):
            listed = client.get("/v1/jobs")
            submitted = client.post("/v1/jobs", json=spec("acme/kernels"))
        assert listed.status_code == 503, listed.text
        assert listed.headers["Retry-After"] == "5" and listed.headers["content-type"] == "application/json"
        assert listed.json() == {"detail": "the service's database is unavailable; retry shortly"}
        assert submitted.status_code == 503 and "Retry-After" in submitted.headers
        assert settings.resolved_database_url.rsplit("/", 1)[1] not in listed.text  # no server detail
        deadline = time.monotonic() + 10
        while (response := client.get("/v1/jobs")).status_code == 503 and time.monotonic() < deadline:
            time.sleep(0.2)  # a pooled connection the outage ended fails once, then is replaced
        assert response.status_code == 200 and response.json()["total"] == 1

"""The real service on a migrated SQLite file, and the worker's client of it: what a JobRunner talks to."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.db.migrate import upgrade
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import WORKER_TOKEN, serve
from worker.service_client import ServiceClient


@pytest.fixture
def settings(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(
        data_dir=tmp_path / "data",
        database_url=f"sqlite:///{tmp_path / 'jobs.db'}",
        worker_token=WORKER_TOKEN,  # type: ignore[arg-type]
    )


@pytest.fixture
def db(settings: ServiceSettings) -> Iterator[Database]:
    upgrade(settings.resolved_database_url)
    database = Database(settings.resolved_database_url)
    yield database
    database.dispose()


@pytest.fixture
def api(settings: ServiceSettings, db: Database) -> Iterator[ServiceClient]:
    """The worker's side of the worker API, against the real service on this database."""
    with serve(settings, dispatch=False) as live:
        client = ServiceClient(live.url, WORKER_TOKEN, retry_s=5)
        yield client
        client.close()

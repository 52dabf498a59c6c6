"""Throw-away databases on the machine's PostgreSQL and Redis, for the service's tests and its benchmark."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.db.session import Database

__all__ = ["assert_migration_adds", "flushed_redis_database", "fresh_postgres_database"]


@contextlib.contextmanager
def fresh_postgres_database(admin_url: str, prefix: str = "intelliperf_test") -> Iterator[str]:
    """Create an empty database named ``prefix`` plus a random suffix through ``admin_url`` (a URL of an
    existing database on the same server), yield its URL, and drop it afterwards, connections and all."""
    from sqlalchemy import create_engine, text

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield admin_url.rsplit("/", 1)[0] + f"/{name}"
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextlib.contextmanager
def flushed_redis_database(base_url: str, number: int) -> Iterator[str]:
    """Redis database ``number`` of the server at ``base_url``, flushed before and after; yields its URL."""
    import redis

    url = f"{base_url}/{number}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    try:
        yield url
    finally:
        client.flushdb()
        client.close()


def assert_migration_adds(
    database_url: str, database: Database, before: str, table: str, unique: list[str]
) -> None:
    """From revision ``before`` to head, the migrations add ``table`` with its ``unique`` columns, as the
    model describes it (``database`` is at ``database_url``)."""
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import inspect

    from service.db.migrate import alembic_config
    from service.db.models import Base

    config = alembic_config(database_url)
    command.upgrade(config, before)
    assert table not in inspect(database.engine).get_table_names()
    command.upgrade(config, "head")
    found = inspect(database.engine)
    assert table in found.get_table_names()
    assert [u["column_names"] for u in found.get_unique_constraints(table)] == [unique]
    with database.engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert [d for d in differences if table in repr(d)] == []

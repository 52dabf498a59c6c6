"""Throw-away databases on the machine's PostgreSQL and Redis, for the service's tests and its benchmark."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

__all__ = ["flushed_redis_database", "fresh_postgres_database"]


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

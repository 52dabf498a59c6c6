"""Engines and sessions. SQLite gets WAL and a busy timeout so the API and a worker can share it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["Database", "upsert_insert"]

# A pooled connection that sat unused this long is pinged before it is handed out (the server may have
# restarted or dropped it); a busy one is not, so a request costs no extra round trip. A connection that
# breaks mid-use anyway is recognised as a disconnect and the whole pool is replaced.
PING_IDLE_S = 5.0


def upsert_insert(session: Session, table: Any) -> Any:
    """An INSERT into ``table`` that takes ON CONFLICT clauses, in the dialect of the session's database
    (PostgreSQL or SQLite, the two the service runs on)."""
    dialect = postgresql if session.get_bind().dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _ping_if_idle(engine: Engine) -> None:
    """Pre-ping, but only for connections idle longer than PING_IDLE_S."""

    @event.listens_for(engine, "checkin")
    def _checkin(_dbapi_connection: Any, record: Any) -> None:
        record.info["checked_in"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        checked_in = record.info.get("checked_in")
        if checked_in is None or time.monotonic() - checked_in < PING_IDLE_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as error:
            if engine.dialect.is_disconnect(error, dbapi_connection, None):
                raise exc.DisconnectionError(str(error)) from error  # the pool reconnects and retries
            raise


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_engine(url, pool_size=20, max_overflow=20)
    _ping_if_idle(engine)
    return engine


class Database:
    """One engine and its session factory; ``session()`` commits on success and rolls back on error."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self.sessions() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()

"""Alembic environment: the URL comes from the Config (set by service.db.migrate), never from a file."""

from __future__ import annotations

from alembic import context

from service.db.models import Base
from service.db.session import make_engine

config = context.config
url = config.get_main_option("sqlalchemy.url")
assert url, "service.db.migrate sets sqlalchemy.url"


def run_offline() -> None:
    context.configure(url=url, target_metadata=Base.metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(url)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()

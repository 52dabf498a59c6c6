"""Dashboard sessions in the database (SQLite and PostgreSQL): what ends one."""

from __future__ import annotations

from datetime import timedelta

from service.auth import ADMIN, Principal, create_token
from service.dashboard_sessions import close_session, open_session, session_principal
from service.db.session import Database

HOUR = timedelta(hours=1)


def test_an_admin_session_ends_when_the_admin_secret_changes(db: Database) -> None:
    with db.session() as session:
        secret = open_session(session, ADMIN, "admin-secret-1", HOUR)
    with db.session() as session:
        assert session_principal(session, secret, "admin-secret-1") == ADMIN
        assert session_principal(session, secret, "admin-secret-2") is None
        assert session_principal(session, secret, None) is None


def test_expired_closed_and_foreign_secrets_stand_for_nobody(db: Database) -> None:
    with db.session() as session:
        token, api_secret = create_token(session, "acme-ci", ["acme/*"])
        scoped = Principal(token_id=token.id, name="acme-ci", repositories=("acme/*",))
        expired = open_session(session, scoped, None, timedelta(seconds=-1))
        live_one = open_session(session, scoped, None, HOUR)
    with db.session() as session:
        assert session_principal(session, live_one, None) == scoped
        assert session_principal(session, expired, None) is None
        assert session_principal(session, api_secret, None) is None  # the API token is not a session
        close_session(session, live_one)
    with db.session() as session:
        assert session_principal(session, live_one, None) is None

"""Dashboard logins kept on the server: the browser's cookie holds a random session secret, never the API
token it was opened with.

A session stands for its token while the token is not revoked (or, for the admin, while the admin
secret is the one it was opened with), and until it expires or its user logs out; a stolen cookie is
worth nothing after either. Every API process reads the same table, so they agree without other state.
"""

from __future__ import annotations

import secrets
from datetime import timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from service.auth import ADMIN, Principal, hash_secret
from service.db.models import ApiToken, DashboardSession, utcnow

__all__ = ["SESSION_PREFIX", "close_session", "open_session", "session_principal"]

SESSION_PREFIX = "ips_"


def open_session(
    session: Session, principal: Principal, admin_secret: str | None, lifetime: timedelta
) -> str:
    """A new session for an authenticated ``principal``; returns its secret (the cookie's value). Expired
    sessions are dropped on the way."""
    now = utcnow()
    session.execute(delete(DashboardSession).where(DashboardSession.expires_at < now))
    secret = SESSION_PREFIX + secrets.token_urlsafe(32)
    admin_hash = hash_secret(admin_secret) if principal.is_admin and admin_secret else None
    if principal.is_admin and admin_hash is None:
        raise ValueError("an admin session needs the admin secret")
    session.add(
        DashboardSession(
            secret_hash=hash_secret(secret),
            token_id=principal.token_id,
            admin_hash=admin_hash,
            created_at=now,
            expires_at=now + lifetime,
        )
    )
    return secret


def session_principal(session: Session, secret: str, admin_secret: str | None) -> Principal | None:
    """Who a session secret stands for, or None: unknown, expired, logged out, its token revoked, or the
    admin secret changed since it was opened."""
    if not secret.startswith(SESSION_PREFIX):
        return None
    row = session.get(DashboardSession, hash_secret(secret))
    if row is None or row.expires_at <= utcnow():
        return None
    if row.token_id is None:
        current = hash_secret(admin_secret) if admin_secret else None
        return ADMIN if current is not None and row.admin_hash == current else None
    token = session.scalar(select(ApiToken).where(ApiToken.id == row.token_id, ApiToken.revoked_at.is_(None)))
    if token is None:
        return None
    return Principal(token_id=token.id, name=token.name, repositories=tuple(token.repositories))


def close_session(session: Session, secret: str) -> None:
    session.execute(delete(DashboardSession).where(DashboardSession.secret_hash == hash_secret(secret)))

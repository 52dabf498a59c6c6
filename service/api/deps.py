"""Request-scoped pieces: the database and the caller's identity."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.auth import Principal, authenticate
from service.db.session import Database
from service.settings import ServiceSettings

__all__ = ["CurrentPrincipal", "get_db", "get_settings", "principal_for"]

_bearer = HTTPBearer(auto_error=False, description="An API token (`intelliperf tokens create`)")


def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


def get_settings(request: Request) -> ServiceSettings:
    settings: ServiceSettings = request.app.state.settings
    return settings


def principal_for(db: Database, settings: ServiceSettings, secret: str) -> Principal | None:
    admin = settings.admin_token.get_secret_value() if settings.admin_token else None
    with db.session() as session:
        return authenticate(session, secret, admin)


def _current_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, "missing bearer token (Authorization: Bearer …)", challenge
        )
    principal = principal_for(get_db(request), get_settings(request), credentials.credentials)
    if principal is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "unknown or revoked token", challenge)
    return principal


CurrentPrincipal = Annotated[Principal, Depends(_current_principal)]

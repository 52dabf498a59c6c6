"""Request-scoped pieces: the database and the caller's identity."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session
from starlette.responses import Response

from service.auth import Principal, authenticate, identify
from service.db.session import Database
from service.settings import ServiceSettings

__all__ = [
    "BearerSecret",
    "CurrentPrincipal",
    "authorized",
    "get_db",
    "get_settings",
    "principal_for",
    "principal_or_401",
    "validation_error_after_auth",
]

_bearer = HTTPBearer(auto_error=False, description="An API token (`intelliperf tokens create`)")


def get_db(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


def get_settings(request: Request) -> ServiceSettings:
    settings: ServiceSettings = request.app.state.settings
    return settings


def principal_for(db: Database, settings: ServiceSettings, secret: str) -> Principal | None:
    with db.session() as session:
        return authenticate(session, secret, settings.admin_secret)


_CHALLENGE = {"WWW-Authenticate": "Bearer"}
_MISSING = "missing bearer token (Authorization: Bearer …)"
_UNKNOWN = "unknown or revoked token"
_STATE_KEY = "bearer_secret"  # request.state: the secret a route authenticates itself, see below


def _bearer_or_401(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, _MISSING, _CHALLENGE)
    return credentials.credentials


def principal_or_401(request: Request, secret: str) -> Principal:
    """The caller, in a session of its own; 401 when the token is unknown or revoked."""
    principal = principal_for(get_db(request), get_settings(request), secret)
    if principal is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, _UNKNOWN, _CHALLENGE)
    return principal


def _current_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    return principal_or_401(request, _bearer_or_401(credentials))


CurrentPrincipal = Annotated[Principal, Depends(_current_principal)]
"""The caller, authenticated in its own session before the route runs (one more threadpool hop)."""


async def _bearer_secret(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> str:
    secret = _bearer_or_401(credentials)
    setattr(request.state, _STATE_KEY, secret)
    return secret


BearerSecret = Annotated[str, Depends(_bearer_secret)]
"""The bearer secret, not yet checked (a missing one is refused here, on the event loop): the route
checks it with ``authorized`` in the session it works in, so a request costs one threadpool hop and one
transaction. A request whose parameters are invalid is answered by ``validation_error_after_auth``,
which checks the secret first, so an unknown token still gets 401 before any 422."""


@contextmanager
def authorized(request: Request, secret: str) -> Iterator[tuple[Session, Principal]]:
    """A session whose caller is authenticated (401 when the token is unknown or revoked); commits when
    the block ends, rolls back when it raises. A token's last use is committed at once when written, so
    it is kept even when the request then fails, as with ``CurrentPrincipal``."""
    with get_db(request).sessions() as session:
        principal, touched = identify(session, secret, get_settings(request).admin_secret)
        if principal is None:
            raise HTTPException(status.HTTP_401_UNAUTHORIZED, _UNKNOWN, _CHALLENGE)
        if touched:
            session.commit()
        yield session, principal
        session.commit()


async def validation_error_after_auth(request: Request, exc: Exception) -> Response:
    """FastAPI validates a route's parameters before the route runs; a route that authenticates itself
    (``BearerSecret``) has its token checked here first, so the answer is what it was when the token
    was checked in a dependency: 401 for an unknown or revoked token, else the 422."""
    assert isinstance(exc, RequestValidationError)
    secret = getattr(request.state, _STATE_KEY, None)
    if secret is not None:
        principal = await run_in_threadpool(principal_for, get_db(request), get_settings(request), secret)
        if principal is None:
            return JSONResponse({"detail": _UNKNOWN}, status.HTTP_401_UNAUTHORIZED, headers=_CHALLENGE)
    return await request_validation_exception_handler(request, exc)

"""The dashboard's login: a server-side session (service.dashboard_sessions) whose secret is kept in an
HttpOnly, SameSite=Strict cookie; the API token it was opened with never leaves the login form.

Every request looks the session up again, so a revoked token or a logout ends it at once. The JSON API
never reads this cookie: it stays bearer-only, so a page elsewhere cannot act on it through a browser.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, HTTPException, Request, Response, status

from service.api.deps import get_db, get_settings
from service.auth import Principal
from service.dashboard_sessions import close_session, open_session, session_principal

__all__ = [
    "COOKIE",
    "DataPrincipal",
    "PagePrincipal",
    "clear_login",
    "remember_login",
    "safe_next",
    "same_origin",
]

COOKIE = "intelliperf_session"
MAX_AGE_S = 12 * 3600
MAX_TOKEN_CHARS = 512


def _principal(request: Request) -> Principal | None:
    secret = request.cookies.get(COOKIE)
    if not secret or len(secret) > MAX_TOKEN_CHARS:
        return None
    with get_db(request).session() as session:
        return session_principal(session, secret, get_settings(request).admin_secret)


def safe_next(target: str | None) -> str:
    """Only a path of this site: never another host (an open redirect), never a scheme."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or any(ord(c) < 0x20 for c in target):
        return "/"
    return target


def _page_principal(request: Request) -> Principal:
    principal = _principal(request)
    if principal is None:
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        location = "/login" if here == "/" else f"/login?next={quote(safe_next(here), safe='/')}"
        raise HTTPException(status.HTTP_303_SEE_OTHER, "log in first", {"Location": location})
    return principal


def _events_principal(request: Request) -> Principal:
    principal = _principal(request)
    if principal is None:
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "log in to the dashboard first")
    return principal


PagePrincipal = Annotated[Principal, Depends(_page_principal)]
"""For pages: without a valid login, a redirect to /login that comes back here."""

DataPrincipal = Annotated[Principal, Depends(_events_principal)]
"""For the event stream and downloads: 401 without a valid login (an EventSource cannot follow a login)."""


def same_origin(request: Request) -> bool:
    """A form post from this site (Origin, or Referer where a browser sends no Origin)."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if source is None:
        return True  # not a browser (curl, a test client): SameSite guards browsers
    parts = urlsplit(source)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.url.scheme}://{request.url.netloc}"


def _secure(request: Request) -> bool:
    """HTTPS as the service sees it (a trusted proxy's X-Forwarded-Proto included), or the operator's word."""
    return get_settings(request).secure_cookies or request.url.scheme == "https"


def remember_login(response: Response, request: Request, principal: Principal) -> None:
    """Open a session for ``principal`` (just authenticated by its token) and set its cookie."""
    admin_secret, lifetime = get_settings(request).admin_secret, timedelta(seconds=MAX_AGE_S)
    with get_db(request).session() as session:
        secret = open_session(session, principal, admin_secret, lifetime)
    response.set_cookie(
        COOKIE,
        secret,
        max_age=MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=_secure(request),
    )


def clear_login(response: Response, request: Request) -> None:
    """End the session on the server (a copy of the cookie is then worthless) and drop the cookie."""
    secret = request.cookies.get(COOKIE)
    if secret and len(secret) <= MAX_TOKEN_CHARS:
        with get_db(request).session() as session:
            close_session(session, secret)
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=_secure(request))

"""The dashboard's login: an API token (or the admin token) kept in an HttpOnly, SameSite=Strict cookie.

The cookie carries the token itself, and every request authenticates it again, so a revoked token
logs its sessions out at once and any number of API processes agree without shared state. The JSON API
never reads this cookie: it stays bearer-only, so a page elsewhere cannot act on it through a browser.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, HTTPException, Request, Response, status

from service.api.deps import get_db, get_settings, principal_for
from service.auth import Principal

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
    return principal_for(get_db(request), get_settings(request), secret)


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


def remember_login(response: Response, request: Request, secret: str) -> None:
    response.set_cookie(
        COOKIE,
        secret,
        max_age=MAX_AGE_S,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_login(response: Response, request: Request) -> None:
    response.delete_cookie(
        COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )

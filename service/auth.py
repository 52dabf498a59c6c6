"""API tokens: made once, shown once, stored as a hash, each scoped to repositories.

A token's secret is ``ipt_`` and 43 URL-safe characters (256 random bits). The database keeps its
SHA-256 and its first characters (to recognise it in ``tokens list``). The admin token comes from
``INTELLIPERF_ADMIN_TOKEN`` and is never stored.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session

from service.db.models import ApiToken, utcnow

__all__ = [
    "ADMIN",
    "Principal",
    "TokenError",
    "authenticate",
    "check_scope",
    "create_token",
    "hash_secret",
    "identify",
    "list_tokens",
    "revoke_token",
    "validate_scope",
]

TOKEN_PREFIX = "ipt_"
LAST_USED_RESOLUTION = timedelta(minutes=1)
NAME_LENGTH = 100  # api_tokens.name


class TokenError(ValueError):
    """A token cannot be made or revoked as asked; the message says why."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: the admin, or a stored token with its repository scopes."""

    token_id: int | None
    name: str
    repositories: tuple[str, ...]

    @property
    def is_admin(self) -> bool:
        return self.token_id is None

    def may_access(self, repository: str | None) -> bool:
        if self.is_admin or "*" in self.repositories:
            return True
        if repository is None:
            return False
        return any(fnmatch.fnmatchcase(repository.lower(), scope.lower()) for scope in self.repositories)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


# owner/name as repository_name gives it; '*' in the name matches any characters (and means the same
# to fnmatch in may_access as to LIKE in the job list), so no other wildcard is let in
_SCOPE = re.compile(r"[\w.-]{1,100}/[\w.*-]{1,100}")


def validate_scope(scope: str) -> str:
    if scope == "*" or _SCOPE.fullmatch(scope):
        return scope
    raise TokenError(
        f"scope {scope!r}: use 'owner/name', 'owner/*' or '*' "
        "(letters, digits, '.', '-' and '_'; '*' only in the name)"
    )


def create_token(session: Session, name: str, repositories: list[str]) -> tuple[ApiToken, str]:
    """A new token; returns the row and the secret, which is never available again."""
    if not name.strip():
        raise TokenError("a token needs a name")
    if len(name.strip()) > NAME_LENGTH:
        raise TokenError(f"a token's name has at most {NAME_LENGTH} characters")
    if not repositories:
        raise TokenError("a token needs at least one repository scope ('owner/name', 'owner/*' or '*')")
    scopes = [validate_scope(scope.strip()) for scope in repositories]
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken(
        name=name.strip(), prefix=secret[:8], secret_hash=hash_secret(secret), repositories=scopes
    )
    session.add(token)
    session.flush()
    return token, secret


def list_tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.id)))


def revoke_token(session: Session, token_id: int) -> ApiToken:
    token = session.get(ApiToken, token_id)
    if token is None:
        raise TokenError(f"no token with id {token_id}")
    if token.revoked_at is None:
        token.revoked_at = utcnow()
    return token


def authenticate(session: Session, secret: str, admin_secret: str | None) -> Principal | None:
    """The principal a bearer secret stands for, or None when it is unknown or revoked."""
    return identify(session, secret, admin_secret)[0]


ADMIN = Principal(token_id=None, name="admin", repositories=("*",))
"""Whoever holds the admin token."""
# built once (the statements are the same for every request; only the bound values differ)
_FIND_TOKEN = select(ApiToken.id, ApiToken.name, ApiToken.repositories, ApiToken.last_used_at).where(
    ApiToken.secret_hash == bindparam("secret_hash"), ApiToken.revoked_at.is_(None)
)
_TOUCH_TOKEN = (
    update(ApiToken).where(ApiToken.id == bindparam("token_id")).values(last_used_at=bindparam("now"))
)


def identify(session: Session, secret: str, admin_secret: str | None) -> tuple[Principal | None, bool]:
    """As ``authenticate``, and whether it wrote the token's last use (at most once a minute), so a
    caller that goes on in the same transaction can commit that first. One query: the columns a
    principal needs, of the token with this secret's hash that is not revoked."""
    if admin_secret and hmac.compare_digest(secret.encode(), admin_secret.encode()):
        return ADMIN, False
    if not secret.startswith(TOKEN_PREFIX):
        return None, False
    row = session.connection().execute(_FIND_TOKEN, {"secret_hash": hash_secret(secret)}).first()
    if row is None:
        return None, False
    token_id, name, repositories, last_used_at = row
    now = utcnow()
    touched = last_used_at is None or now - last_used_at > LAST_USED_RESOLUTION
    if touched:
        session.connection().execute(_TOUCH_TOKEN, {"token_id": token_id, "now": now})
    return Principal(token_id=token_id, name=name, repositories=tuple(repositories)), touched


def check_scope(principal: Principal, repository: str | None) -> str | None:
    """None when the principal may submit for ``repository``, else the reason it may not."""
    if principal.may_access(repository):
        return None
    scopes = ", ".join(principal.repositories)
    if repository is None:
        return f"token {principal.name!r} is scoped to {scopes}; a job without a repository needs scope '*'"
    return f"token {principal.name!r} is scoped to {scopes}, not to {repository}"

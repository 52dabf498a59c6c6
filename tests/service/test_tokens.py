"""`intelliperf tokens create|list|revoke` for real, against the database INTELLIPERF_DATABASE_URL names
(SQLite and PostgreSQL): the secret is printed once, the database keeps only its SHA-256, a revoked
token is refused by the API, and a bad scope or name exits 2 with a message and stores nothing."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from intelliperf.cli import full_app
from service.db.models import ApiToken
from service.db.session import Database
from service.settings import get_service_settings
from tests.service.conftest import ROOT, LiveService

SECRET = re.compile(r"ipt_[A-Za-z0-9_-]{43}")


def intelliperf(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a process of its own, configured only by the environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    env |= {"INTELLIPERF_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "intelliperf", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def cli(database_url: str) -> Iterator[CliRunner]:
    """The same commands in this process (faster, for the refusals), against the same kind of database."""
    get_service_settings.cache_clear()
    yield CliRunner(env={"INTELLIPERF_DATABASE_URL": database_url, "INTELLIPERF_ADMIN_TOKEN": None})
    get_service_settings.cache_clear()


def test_a_token_is_shown_once_stored_hashed_used_listed_and_revoked(live: LiveService, db: Database) -> None:
    url = live.settings.resolved_database_url
    made = intelliperf(url, "tokens", "create", "--name", "ci-acme", "--repo", "acme/*", "--repo", "tools/x")
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip()
    assert SECRET.fullmatch(secret), made.stdout  # stdout is the secret alone, for `$(...)`
    assert "token 1 (ci-acme) for acme/*, tools/x; the secret is shown once" in made.stderr
    assert secret not in made.stderr

    with db.session() as session:
        token = session.scalars(select(ApiToken)).one()
        assert token.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
        assert token.prefix == secret[:8]
        assert token.repositories == ["acme/*", "tools/x"]
        stored = [str(getattr(token, column.key)) for column in ApiToken.__table__.columns]
        assert not any(secret in value or secret[8:] in value for value in stored)

    with live.client(secret) as client:
        assert client.get("/v1/jobs").status_code == 200
        spec = {"applications": [{"command": "./app"}]}
        ok = client.post("/v1/jobs", json={**spec, "repository": {"url": "https://github.com/acme/k.git"}})
        assert ok.status_code == 201, ok.text
        other = client.post("/v1/jobs", json={**spec, "repository": {"url": "https://github.com/evil/k"}})
        assert other.status_code == 403, other.text

    listed = intelliperf(url, "tokens", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if "ci-acme" in line)
    assert secret[:8] in row and "acme/*, tools/x" in row
    assert secret not in listed.stdout

    revoked = intelliperf(url, "tokens", "revoke", "1")
    assert revoked.returncode == 0, revoked.stderr
    assert "token 1 (ci-acme) revoked" in revoked.stderr
    with live.client(secret) as client:
        response = client.get("/v1/jobs")
        assert response.status_code == 401
        assert response.json()["detail"] == "unknown or revoked token"
    with db.session() as session:
        token = session.scalars(select(ApiToken)).one()
        assert token.revoked_at is not None and token.last_used_at is not None


def test_each_token_has_its_own_secret_and_revoking_one_keeps_the_other(
    cli: CliRunner, live: LiveService
) -> None:
    first = cli.invoke(full_app(), ["tokens", "create", "--name", "a", "--repo", "*"])
    second = cli.invoke(full_app(), ["tokens", "create", "--name", "b", "--repo", "*"])
    assert first.exit_code == second.exit_code == 0, first.output + second.output
    secrets = [first.stdout.strip(), second.stdout.strip()]
    assert all(SECRET.fullmatch(secret) for secret in secrets) and secrets[0] != secrets[1]
    assert cli.invoke(full_app(), ["tokens", "revoke", "1"]).exit_code == 0
    assert cli.invoke(full_app(), ["tokens", "revoke", "1"]).exit_code == 0  # revoking again changes nothing
    with live.client(secrets[0]) as gone, live.client(secrets[1]) as kept:
        assert gone.get("/v1/workers").status_code == 401
        assert kept.get("/v1/workers").status_code == 200


BAD_TOKENS: list[tuple[list[str], str]] = [
    (["--name", "ci", "--repo", "acme"], "scope 'acme': use 'owner/name', 'owner/*' or '*'"),
    (["--name", "ci", "--repo", "*/kernels"], "scope '*/kernels'"),
    (["--name", "ci", "--repo", "acme/[k]ernels"], "scope 'acme/[k]ernels'"),
    (["--name", "ci", "--repo", "acme/k?rnels"], "scope 'acme/k?rnels'"),
    (["--name", "ci", "--repo", "a/b/c"], "scope 'a/b/c'"),
    (["--name", "ci", "--repo", "acme/*", "--repo", ""], "scope ''"),
    (["--name", "  ", "--repo", "acme/*"], "a token needs a name"),
    (["--name", "n" * 101, "--repo", "acme/*"], "a token's name has at most 100 characters"),
    (["--name", "ci"], "Missing option '--repo'"),
]


def test_a_bad_scope_or_name_exits_2_with_a_message_and_stores_nothing(
    cli: CliRunner, db: Database, subtests: pytest.Subtests
) -> None:
    for args, message in BAD_TOKENS:
        with subtests.test(" ".join(args)[:60]):
            result = cli.invoke(full_app(), ["tokens", "create", *args])
            assert result.exit_code == 2, result.output
            assert message in " ".join(result.stderr.split()), result.stderr
            assert result.stdout == ""
            with db.session() as session:
                assert session.scalars(select(ApiToken)).all() == []


def test_revoking_an_unknown_token_exits_2(cli: CliRunner, db: Database) -> None:
    result = cli.invoke(full_app(), ["tokens", "revoke", "99"])
    assert result.exit_code == 2
    assert "no token with id 99" in result.stderr
    result = cli.invoke(full_app(), ["tokens", "revoke", "first"])
    assert result.exit_code == 2
    assert "Invalid value for 'token_id'" in result.stderr and "valid integer" in result.stderr

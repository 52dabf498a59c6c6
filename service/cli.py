"""`intelliperf serve`, `intelliperf worker` and `intelliperf tokens`: the service's commands.

Imports of the service's dependencies happen inside the commands, so a GPU node without the
``service`` extra still has a working ``intelliperf run``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.markup import escape
from rich.table import Table

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from service.settings import ServiceSettings

__all__ = ["register"]

stdout = Console(width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, soft_wrap=True)
_start_workers: Callable[[str], list[subprocess.Popen[bytes]]] | None = None
tokens_app = typer.Typer(help="Create, list and revoke API tokens (run where the database is reachable).")


@contextlib.contextmanager
def _session() -> Iterator[Session]:
    """A session on the migrated database; commits on success, and closes the engine either way."""
    from service.db.migrate import upgrade
    from service.db.session import Database
    from service.settings import get_service_settings

    url = get_service_settings().resolved_database_url
    upgrade(url)
    db = Database(url)
    try:
        with db.session() as session:
            yield session
    finally:
        db.dispose()


@tokens_app.command("create")
def tokens_create(
    name: Annotated[str, typer.Option("--name", help="Who or what uses it, e.g. 'ci-myrepo'")],
    repo: Annotated[
        list[str], typer.Option("--repo", help="Repository scope: owner/name, owner/* or * (repeatable)")
    ],
) -> None:
    """Make a token; its secret is printed once and never stored."""
    from service.auth import TokenError, create_token

    try:
        with _session() as session:
            token, secret = create_token(session, name, repo)
            token_id = token.id
    except TokenError as exc:
        stderr.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(code=2) from None
    stderr.print(
        escape(f"token {token_id} ({name.strip()}) for {', '.join(repo)}; the secret is shown once:"),
        highlight=False,
    )
    stdout.print(secret, highlight=False, markup=False, soft_wrap=True)


@tokens_app.command("list")
def tokens_list() -> None:
    """Every token: id, name, prefix, scopes, created, last used, revoked."""
    from service.auth import list_tokens

    table = Table("id", "name", "prefix", "repositories", "created", "last used", "revoked")
    with _session() as session:
        for token in list_tokens(session):
            table.add_row(
                str(token.id),
                escape(token.name),
                token.prefix + "…",
                ", ".join(token.repositories),
                f"{token.created_at:%Y-%m-%d %H:%M}",
                f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "-",
                f"{token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "-",
            )
    stdout.print(table)


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[int, typer.Argument(help="The token's id (see `tokens list`)")],
) -> None:
    """Revoke a token: requests with it are refused from now on."""
    from service.auth import TokenError, revoke_token

    try:
        with _session() as session:
            token = revoke_token(session, token_id)
            name = token.name
    except TokenError as exc:
        stderr.print(f"[bold red]error:[/bold red] {escape(str(exc))}", highlight=False)
        raise typer.Exit(code=2) from None
    stderr.print(escape(f"token {token_id} ({name}) revoked"), highlight=False)


def _kept_secret(configured: SecretStr | None, token_file: Path) -> str:
    """The configured value, else one made on first start and kept (mode 0600) in the data folder."""
    if configured is not None:
        return configured.get_secret_value()
    if token_file.is_file():
        return token_file.read_text().strip()
    token_file.parent.mkdir(parents=True, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    token_file.touch(mode=0o600)
    token_file.write_text(secret + "\n")
    return secret


def uvicorn_options(settings: ServiceSettings) -> dict[str, object]:
    """How the server treats proxies: forwarded headers only from the proxies the operator trusts."""
    return {"proxy_headers": True, "forwarded_allow_ips": settings.forwarded_allow_ips}


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on")] = 8000,
    with_worker: Annotated[
        bool, typer.Option("--worker/--no-worker", help="Also start a local worker (embedded default)")
    ] = True,
) -> None:
    """API, dashboard and (by default) a local worker, on SQLite and a filesystem broker unless
    INTELLIPERF_DATABASE_URL and INTELLIPERF_BROKER_URL say otherwise."""
    import uvicorn

    from service.api.app import create_app
    from service.api.server import freeze_startup_heap
    from service.settings import get_service_settings

    settings = get_service_settings()
    token_from_env = settings.admin_token is not None
    os.environ["INTELLIPERF_ADMIN_TOKEN"] = _kept_secret(
        settings.admin_token, settings.data_dir / "admin-token"
    )
    os.environ["INTELLIPERF_SECRET_KEY"] = _kept_secret(settings.secret_key, settings.data_dir / "secret-key")
    os.environ["INTELLIPERF_WORKER_TOKEN"] = _kept_secret(
        settings.worker_token, settings.data_dir / "worker-token"
    )
    get_service_settings.cache_clear()
    settings = get_service_settings()
    app = create_app(settings)
    freeze_startup_heap()
    workers: list[subprocess.Popen[bytes]] = []
    if with_worker:
        if _start_workers is None:
            stderr.print(
                "[bold red]error:[/bold red] no worker package to start a local worker from; use --no-worker"
            )
            raise typer.Exit(code=2)
        local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        # the local workers reach the API as any worker does: its URL and the (inherited) worker token
        workers = _start_workers(f"http://{local}:{port}")
    where = f"http://{host}:{port}"
    stderr.print(f"IntelliPerf on {where}  (dashboard {where}/, API docs {where}/docs)", highlight=False)
    stderr.print(
        f"database {settings.resolved_database_url}; broker {settings.resolved_broker_url}", highlight=False
    )
    if not token_from_env:
        stderr.print(
            f"admin token: in {settings.data_dir / 'admin-token'} (set INTELLIPERF_ADMIN_TOKEN to choose)"
        )
    try:
        uvicorn.run(app, host=host, port=port, log_level="info", **uvicorn_options(settings))
    finally:
        for process in workers:
            process.terminate()
        for process in workers:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def register(
    app: typer.Typer, *, start_workers: Callable[[str], list[subprocess.Popen[bytes]]] | None
) -> None:
    """Add `serve` and `tokens` to ``app``. ``start_workers`` starts the local workers of the embedded default
    (`serve --worker`): the composition is the caller's, so the service does not import the worker."""
    global _start_workers
    _start_workers = start_workers
    app.add_typer(tokens_app, name="tokens")
    app.command(help=serve.__doc__)(serve)

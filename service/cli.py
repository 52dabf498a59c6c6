"""`intelliperf serve`, `intelliperf worker` and `intelliperf tokens`: the service's commands.

Imports of the service's dependencies happen inside the commands, so a GPU node without the
``service`` extra still has a working ``intelliperf run``.

`serve` and `tokens` find the embedded default's folder alike (``--data-dir``, else INTELLIPERF_DATA_DIR,
else the user's data directory: intelliperf.jobqueue.default_data_dir), and `serve` hands its folder to
its local workers, so they share the filesystem broker's.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
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
    import uvicorn
    from sqlalchemy.orm import Session

    from service.settings import ServiceSettings

__all__ = ["register"]

stdout = Console(width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, soft_wrap=True)
_start_workers: Callable[..., list[subprocess.Popen[bytes]]] | None = None
tokens_app = typer.Typer(help="Create, list and revoke API tokens (run where the database is reachable).")
SECRET_FILES = ("admin-token", "secret-key", "worker-token")
LEGACY_DATA_DIR = Path("intelliperf-data")
"""Where `serve` kept its data, in the folder it was started in, before the user's data directory."""
DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        file_okay=False,
        help="The embedded default's folder: SQLite database, filesystem broker, the secrets made on first "
        "start, serve.log (default: INTELLIPERF_DATA_DIR, else the user's data directory)",
    ),
]


def _use_data_dir(folder: Path) -> None:
    """Make ``folder`` the data folder of this process and of the processes it starts."""
    from service.settings import get_service_settings

    os.environ["INTELLIPERF_DATA_DIR"] = str(folder.expanduser().resolve())
    get_service_settings.cache_clear()


@tokens_app.callback()
def tokens_options(data_dir: DataDirOption = None) -> None:
    """Without INTELLIPERF_DATABASE_URL, the tokens are in the database of the data folder `serve` uses."""
    if data_dir is not None:
        _use_data_dir(data_dir)


@contextlib.contextmanager
def _session() -> Iterator[Session]:
    """A session on the migrated database; commits on success, and closes the engine either way."""
    from service.db.migrate import upgrade
    from service.db.session import Database
    from service.settings import get_service_settings

    settings = get_service_settings()
    url = settings.resolved_database_url
    if settings.database_url is None and not (settings.data_dir / "intelliperf.db").is_file():
        stderr.print(
            f"[bold red]error:[/bold red] no database in {escape(str(settings.data_dir.resolve()))}: start "
            "`intelliperf serve` first, or name the folder it uses (--data-dir, INTELLIPERF_DATA_DIR) or "
            "its database (INTELLIPERF_DATABASE_URL)",
            highlight=False,
        )
        raise typer.Exit(code=2)
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


def unignored_in_git(folder: Path) -> tuple[Path, str] | None:
    """The git work tree ``folder`` is in, and the folder's path in it, when the work tree does not ignore
    what `serve` writes there (`git add .` would take its secrets); None outside a work tree, where it
    ignores them, or without git."""
    names = (*SECRET_FILES, "intelliperf.db", "serve.log")
    try:
        found = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if found.returncode != 0 or not found.stdout.strip():
            return None  # not in a work tree (or in a .git folder)
        root = Path(found.stdout.strip())
        inside = folder.resolve().relative_to(root.resolve()).as_posix()
        paths = [f"{inside}/{name}" if inside != "." else name for name in names]
        checked = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "-z", "--stdin"],
            input="\0".join(paths) + "\0",
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None
    if checked.returncode not in (0, 1):  # 1: none of them is ignored
        return None
    return (root, inside) if set(paths) - set(checked.stdout.split("\0")) else None


def _git_warning(folder: Path) -> str | None:
    exposed = unignored_in_git(folder)
    if exposed is None:
        return None
    root, inside = exposed
    fix = (
        f"add '/{inside}/' to {root / '.gitignore'}, or use a folder outside it (--data-dir)"
        if inside != "."
        else "use a folder outside it (--data-dir)"
    )
    return (
        f"warning: the data folder {folder} is in the git work tree {root}, which does not ignore it: "
        f"`git add` would take its secrets (admin token, secret key); {fix}"
    )


def _shown_url(url: str) -> str:
    """A database or broker URL without its password."""
    from kombu.utils.url import maybe_sanitize_url
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return str(maybe_sanitize_url(url))


def _server(
    config: uvicorn.Config, *, started: Callable[[], None], stopping: Callable[[], None]
) -> uvicorn.Server:
    """A uvicorn server that calls ``started`` once it listens, and ``stopping`` when asked to stop, while
    it still serves: the local workers start when the API can hear them and stop before it goes, so none
    of their heartbeats fails."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and not self.should_exit:
                await asyncio.to_thread(started)

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            await asyncio.to_thread(stopping)
            await super().shutdown(sockets)

    return Server(config)


def _stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on")] = 8000,
    with_worker: Annotated[
        bool, typer.Option("--worker/--no-worker", help="Also start a local worker (embedded default)")
    ] = True,
    data_dir: DataDirOption = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Show the whole log on the console too: every request, the local workers' Celery output",
        ),
    ] = False,
) -> None:
    """API, dashboard and (by default) a local worker. Without INTELLIPERF_DATABASE_URL and
    INTELLIPERF_BROKER_URL: SQLite and a filesystem broker in the data folder (--data-dir, else
    INTELLIPERF_DATA_DIR, else the user's data directory). The console shows where things are and one line
    per job event; the whole log is serve.log in the data folder."""
    import uvicorn

    from service.api.app import create_app
    from service.api.server import freeze_startup_heap
    from service.serve_log import configure
    from service.settings import get_service_settings

    if with_worker and _start_workers is None:
        stderr.print(
            "[bold red]error:[/bold red] no worker package to start a local worker from; use --no-worker"
        )
        raise typer.Exit(code=2)
    chosen = data_dir is not None or bool(os.environ.get("INTELLIPERF_DATA_DIR"))
    if data_dir is not None:
        _use_data_dir(data_dir)
    settings = get_service_settings()
    folder = settings.data_dir.expanduser().resolve()
    _use_data_dir(folder)  # the local workers (the filesystem broker's folder) and `tokens` find this one
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_file = configure(folder, verbose=verbose)
    warning = _git_warning(folder)
    if warning is not None:
        stderr.print(escape(warning), highlight=False)
    legacy = LEGACY_DATA_DIR.resolve()
    if not chosen and legacy != folder and (legacy / "admin-token").is_file():
        stderr.print(
            escape(
                f"note: {legacy} holds the jobs and tokens of an earlier `intelliperf serve`, which kept its "
                f"data in the folder it started in; this one uses {folder}: to go on with the old folder, "
                f"pass --data-dir {LEGACY_DATA_DIR}"
            ),
            highlight=False,
        )
    token_from_env = settings.admin_token is not None
    os.environ["INTELLIPERF_ADMIN_TOKEN"] = _kept_secret(settings.admin_token, folder / "admin-token")
    os.environ["INTELLIPERF_SECRET_KEY"] = _kept_secret(settings.secret_key, folder / "secret-key")
    os.environ["INTELLIPERF_WORKER_TOKEN"] = _kept_secret(settings.worker_token, folder / "worker-token")
    get_service_settings.cache_clear()
    settings = get_service_settings()
    app = create_app(settings)
    freeze_startup_heap()
    workers: list[subprocess.Popen[bytes]] = []
    where = f"http://{host}:{port}"

    def started() -> None:
        stderr.print(
            escape(f"IntelliPerf on {where}  (dashboard {where}/, API docs {where}/docs)"), highlight=False
        )
        stderr.print(escape(f"data in {folder}; log in {log_file}"), highlight=False)
        if settings.database_url or settings.broker_url:
            database = _shown_url(settings.resolved_database_url)
            broker = _shown_url(settings.broker_url) if settings.broker_url else "files in the data folder"
            stderr.print(escape(f"database {database}; broker {broker}"), highlight=False)
        if not token_from_env:
            stderr.print(
                escape(f"admin token: in {folder / 'admin-token'} (set INTELLIPERF_ADMIN_TOKEN to choose)"),
                highlight=False,
            )
        if with_worker and _start_workers is not None:
            local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            # the local workers reach the API as any worker does: its URL and the (inherited) worker token
            workers.extend(_start_workers(f"http://{local}:{port}", log=log_file, verbose=verbose))

    def stopping() -> None:
        if any(process.poll() is None for process in workers):
            stderr.print("stopping the local worker (a job it runs is stopped after 15 s)", highlight=False)
        _stop(workers)

    config = uvicorn.Config(
        app, host=host, port=port, log_level="info", log_config=None, **uvicorn_options(settings)
    )
    server = _server(config, started=started, stopping=stopping)
    try:
        server.run()
    finally:
        _stop(workers)
    if not server.started:
        raise typer.Exit(code=3)


def register(
    app: typer.Typer, *, start_workers: Callable[[str], list[subprocess.Popen[bytes]]] | None
) -> None:
    """Add `serve` and `tokens` to ``app``. ``start_workers`` starts the local workers of the embedded default
    (`serve --worker`): the composition is the caller's, so the service does not import the worker."""
    global _start_workers
    _start_workers = start_workers
    app.add_typer(tokens_app, name="tokens")
    app.command(help=serve.__doc__)(serve)

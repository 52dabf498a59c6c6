"""Serve the API from several processes, each with its own listening socket on the same port.

``uvicorn --workers N`` hands one listening socket to every process, and uvloop (libuv) accepts every
pending connection at once: a burst of keep-alive connections lands on whichever process woke first and
the others stay idle (measured: one of two processes served 75 to 95% of the requests). Here each process
binds its own socket with ``SO_REUSEPORT`` and the kernel spreads new connections over them.

    python -m service.api.server --host 0.0.0.0 --port 8000 --workers 2

The app is ``service.api.app:create_app`` (settings from INTELLIPERF_*). The parent only supervises: it
stops the others when one exits, and stops them all on SIGTERM or SIGINT.

Each process freezes its start-up heap (``freeze_startup_heap``) before it serves: the modules, routes and
schemas of a loaded app are some 170,000 objects that CPython's full (generation 2) collection walks every
time; on the 2-core benchmark machine each walk stopped the process for 80 to 170 ms, and those pauses were
the POST p99. Frozen objects are never walked; what requests allocate still is.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import multiprocessing
import signal
import socket
import sys
import time
from typing import Any

__all__ = ["bind", "freeze_startup_heap", "main", "serve"]


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def _uvicorn_options(log_level: str, access_log: bool) -> dict[str, Any]:
    options: dict[str, Any] = {"log_level": log_level, "access_log": access_log}
    for module, option in (("uvloop", "loop"), ("httptools", "http")):
        with contextlib.suppress(ImportError):
            __import__(module)
            options[option] = module
    return options


def freeze_startup_heap() -> int:
    """Collect what start-up left behind, then move every surviving object to the permanent generation,
    out of reach of later collections (they live as long as the process anyway). Returns the number of
    objects frozen. Call it once per server process, after the app is built and before it serves."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def _run(host: str, port: int, options: dict[str, Any], *, migrate: bool = True) -> None:
    import uvicorn

    from service.api.app import create_app

    sock = bind(host, port)
    app = create_app(migrate=migrate)
    freeze_startup_heap()
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, **options)).run(sockets=[sock])


def serve(host: str, port: int, workers: int, *, log_level: str = "info", access_log: bool = True) -> int:
    """Run ``workers`` server processes until one exits or a signal stops them; returns an exit code."""
    options = _uvicorn_options(log_level, access_log)
    if workers <= 1:
        _run(host, port, options)
        return 0
    # the schema is brought up to date once, here: processes that each migrated a fresh database at the same
    # time raced (one of them failed creating a table the other had just made, and took the server down)
    from service.db.migrate import upgrade
    from service.settings import get_service_settings

    upgrade(get_service_settings().resolved_database_url)
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(
            target=_run,
            args=(host, port, options),
            kwargs={"migrate": False},
            name=f"intelliperf-api-{n}",
            daemon=False,
        )
        for n in range(workers)
    ]
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        for process in processes:
            process.start()
        while not stopping and all(p.is_alive() for p in processes):
            time.sleep(0.2)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()  # uvicorn shuts down gracefully on SIGTERM
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
                process.join()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    codes = [p.exitcode or 0 for p in processes]
    return 0 if stopping else max(codes, default=0) or 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--no-access-log", action="store_true")
    args = parser.parse_args(argv)
    return serve(
        args.host, args.port, args.workers, log_level=args.log_level, access_log=not args.no_access_log
    )


if __name__ == "__main__":
    sys.exit(main())

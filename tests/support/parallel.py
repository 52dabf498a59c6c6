"""What tests running side by side (pytest-xdist: scripts/test runs ``-n 2``) must not share: each worker
takes its own TCP ports and its own Redis database numbers. Without xdist there is one worker, which takes
them all."""

from __future__ import annotations

import os
import socket

__all__ = ["free_port", "worker_share"]


def worker_share() -> tuple[int, int]:
    """(this worker's index, how many workers run the tests): (0, 1) without xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not name.startswith("gw"):
        return 0, 1
    return int(name.removeprefix("gw")), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now, for a server started next. Each worker takes
    only its share of the ports the system hands out, so two workers are never handed the same port in the
    moment before the first one's server takes it. The share goes by half the port's number, not by the
    number itself: Linux hands a bind to port 0 odd ports first (even ones go to outgoing connections), so a
    worker taking the even ports would wait for the odd ones to run out."""
    index, count = worker_share()
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port // 2 % count == index:
            return port

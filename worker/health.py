"""The worker image's healthcheck: healthy while a worker of this host has reported to the service lately.

    python -m worker.health    # exit 0: a live worker on this host; 1: none; 2: no answer from the service

Asked through the worker API with the worker token (no database on a GPU node).
"""

from __future__ import annotations

import socket
import sys

import httpx

from worker.settings import get_worker_settings


def main() -> int:
    settings = get_worker_settings()
    token = settings.worker_token.get_secret_value() if settings.worker_token else ""
    try:
        response = httpx.get(
            f"{settings.service_url.rstrip('/')}/v1/worker/workers",
            params={"hostname": socket.gethostname()},
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        response.raise_for_status()
    except httpx.HTTPError as exc:
        sys.stderr.write(f"the service did not answer: {exc}\n")
        return 2
    alive = [w["name"] for w in response.json() if w["alive"]]
    sys.stdout.write(f"live workers on this host: {', '.join(alive) or 'none'}\n")
    return 0 if alive else 1


if __name__ == "__main__":
    raise SystemExit(main())

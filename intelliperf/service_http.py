"""What both clients of the service (the Action's, intelliperf.action._client; a worker's,
worker.service_client) read out of its answers: its own words, and which statuses mean "not now"."""

from __future__ import annotations

import httpx

__all__ = ["MAX_RETRY_AFTER_S", "UNAVAILABLE", "response_detail", "retry_after_s"]

UNAVAILABLE = (502, 503, 504)
"""The service, its proxy or its database is away for the moment: the same request may be tried again."""
MAX_RETRY_AFTER_S = 30.0
"""The longest wait a service's Retry-After is taken at, whatever it names."""


def retry_after_s(response: httpx.Response) -> float | None:
    """The response's Retry-After in seconds (delta-seconds form), kept within 0.1 s and MAX_RETRY_AFTER_S;
    None when it names none."""
    value = response.headers.get("Retry-After")
    try:
        return min(max(float(value), 0.1), MAX_RETRY_AFTER_S) if value else None
    except ValueError:
        return None


def response_detail(response: httpx.Response) -> str:
    """The server's own words: FastAPI's ``detail`` (a string, or a list of located errors)."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:500] or response.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict) and "msg" in item:
                loc = ".".join(str(p) for p in item.get("loc", []))
                parts.append(f"{loc}: {item['msg']}" if loc else str(item["msg"]))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return str(detail)

"""Following a service job's events to its end: the Action's step log and `intelliperf submit` alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from intelliperf.action._client import FINISHED, ServiceClient, ServiceError

__all__ = ["STREAM_RECONNECTS", "TimedOut", "event_line", "follow_job"]

STREAM_RECONNECTS = 20


class TimedOut(Exception):
    """The job did not finish before the deadline."""


def event_line(event_kind: str, data: dict[str, Any]) -> str:
    message = str(data.get("message", ""))
    stage = data.get("stage")
    if event_kind == "stage":
        return f"[{stage}] {message}" if stage else message
    if event_kind == "state":
        return f"== {message}"
    return message


def follow_job(
    client: ServiceClient,
    job_id: str,
    deadline: float,
    *,
    on_line: Callable[[str], None],
    retry_wait_s: float,
) -> None:
    """Pass each of the job's events, as lines, to ``on_line`` until the ``end`` event; reconnect where the
    stream broke (up to STREAM_RECONNECTS times). Raises TimedOut at ``deadline`` (time.monotonic), and
    ServiceError when the service refuses the stream."""
    last, breaks = 0, 0
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimedOut
        try:
            for event in client.events(job_id, after=last, read_timeout_s=max(1.0, min(60.0, remaining))):
                if event.id is not None:
                    last = event.id
                if event.kind == "end":
                    return
                if event.kind != "keep-alive":
                    for line in event_line(event.kind, event.data).splitlines() or [""]:
                        on_line(line)
                if time.monotonic() > deadline:
                    raise TimedOut
        except ServiceError as exc:
            if exc.status is not None and exc.status < 500:
                raise
            breaks += 1
            if breaks > STREAM_RECONNECTS:
                raise
            if time.monotonic() + retry_wait_s > deadline:
                raise TimedOut from None
            on_line(f"(the event stream broke: {exc}; reconnecting)")
            time.sleep(retry_wait_s)
            continue
        # the stream ended without `end` (a proxy closed it): check the job, resume if it still runs
        if client.job(job_id)["status"] in FINISHED:
            return

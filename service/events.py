"""A job's events as a server-sent-events stream, shared by the API and the dashboard.

Each event is ``id`` (resume with Last-Event-ID), ``event`` (state, stage or log) and JSON ``data``.
The stream ends with an ``end`` event once the job has finished and every event is sent; without
``follow`` it ends after the events recorded so far. The job's status is read before its events, so
the final event (written with the final status) is never missed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from service.db.models import FINISHED, Job
from service.db.session import Database
from service.jobs import events_after

__all__ = ["KEEPALIVE_S", "event_stream", "event_stream_response"]

KEEPALIVE_S = 15.0


def _read(db: Database, job_id: str, after: int) -> tuple[str, list[dict[str, Any]]]:
    with db.session() as session:
        job = session.get(Job, job_id)
        if job is None:
            return "cancelled", []
        status = job.status
        events = events_after(session, job_id, after)
        return status, [
            {
                "id": e.id,
                "kind": e.kind,
                "stage": e.stage,
                "message": e.message,
                "at": e.created_at.isoformat(),
            }
            for e in events
        ]


async def event_stream(
    db: Database,
    job_id: str,
    *,
    after: int,
    follow: bool,
    poll_s: float,
    disconnected: Callable[[], Awaitable[bool]],
) -> AsyncIterator[str]:
    last, quiet = after, 0.0
    while True:
        status, events = await run_in_threadpool(_read, db, job_id, last)
        for event in events:
            last = event["id"]
            yield f"id: {last}\nevent: {event['kind']}\ndata: {json.dumps(event)}\n\n"
        if events:
            quiet = 0.0
            continue
        if status in FINISHED:
            yield f"event: end\ndata: {json.dumps({'status': status})}\n\n"
            return
        if not follow or await disconnected():
            return
        await asyncio.sleep(poll_s)
        quiet += poll_s
        if quiet >= KEEPALIVE_S:
            quiet = 0.0
            yield ": keep-alive\n\n"


def event_stream_response(
    request: Request,
    db: Database,
    job_id: str,
    *,
    after: int,
    last_event_id: str | None,
    follow: bool,
    poll_s: float,
) -> StreamingResponse:
    """The HTTP response of a job's event stream (API and dashboard alike): it resumes after the later of
    ``after`` and the client's Last-Event-ID, and stops when the client goes away."""
    frames = event_stream(
        db,
        job_id,
        after=max(after, int(last_event_id) if last_event_id else 0),
        follow=follow,
        poll_s=poll_s,
        disconnected=request.is_disconnected,
    )
    return StreamingResponse(
        frames,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )

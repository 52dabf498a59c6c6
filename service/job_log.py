"""One log line per job event, once the event is in the database: what `intelliperf serve` shows.

The job record's functions (service.jobs) note each state and stage event they write on the caller's
session; the notes are logged (logger ``intelliperf.jobs``, INFO) when that session's transaction commits,
and dropped when it rolls back, so a line is never printed for an event that was not kept. A job's log
lines (a build's output) are not logged: they are in its event stream. Nothing is noted while the logger
would drop the line (the production server configures no INFO logging), so the API pays nothing for it.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

__all__ = ["LOGGER", "note"]

LOGGER = "intelliperf.jobs"
MAX_CHARS = 200
_KEY = "intelliperf.job_log"
log = logging.getLogger(LOGGER)


def note(session: Session, job_id: str, kind: str, message: str, stage: str | None = None) -> None:
    """Log ``job_id``'s event when ``session`` commits: a state change as its message ("queued on ...",
    "started on ...", "succeeded: diagnosed"), a stage as its message ("timing done: 2 kernels, ...") named
    by its stage where the message does not start with it ("source: fetching the project"); nothing for a
    log line."""
    if kind not in ("state", "stage") or not log.isEnabledFor(logging.INFO):
        return
    text = (message.strip().splitlines() or [""])[0]
    if kind == "stage" and stage and not text.startswith(stage):
        text = f"{stage}: {text}" if text else stage
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 1] + "…"
    session.info.setdefault(_KEY, []).append((job_id, text))


@event.listens_for(Session, "after_commit")
def _committed(session: Session) -> None:
    if session.in_nested_transaction():  # a savepoint: the outer transaction may still roll back
        return
    for job_id, text in session.info.pop(_KEY, ()):
        log.info("job %s %s", job_id, text)


@event.listens_for(Session, "after_transaction_end")
def _ended(session: Session, transaction: SessionTransaction, *_: Any) -> None:
    if transaction.parent is None:  # the outer transaction ended without a commit: nothing was kept
        session.info.pop(_KEY, None)

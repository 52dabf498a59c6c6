"""Counter entries kept per repository for later jobs to reuse (intelliperf.engine.counter_store), so
reuse does not depend on which worker node runs a job: the worker API lists and serves a job's
repository's entries and stores what a job that publishes (``JobSpec.publishes_counters``: cloned from
the base branch it tracks; an uploaded archive never publishes) measured, once checked
(service.api.worker_api).

Publishing a key that is there replaces its entry, which then counts as new: a kernel's key comes back
only when its entry could not be used (its source files changed, so it was profiled again), and the newer
entry is the one later jobs can use, where keeping the first would have the kernel profiled on every push.
After each publish the repository's oldest entries are dropped until the rest fit in ``max_bytes``
(``counter_store_max_bytes``); two publishes at once may leave it over until the next one.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from intelliperf.contract.worker import CounterEntryInfo
from service.db.models import CounterEntry, utcnow
from service.db.session import upsert_insert

__all__ = ["entry_body", "list_entries", "store_entry"]

_NEWEST_FIRST = (CounterEntry.created_at.desc(), CounterEntry.id.desc())
_REPLACED = ("body", "size", "job_id", "created_at")


def list_entries(session: Session, repository: str) -> list[CounterEntryInfo]:
    """``repository``'s entries (owner/name, any case), newest first."""
    rows = session.execute(
        select(CounterEntry.key, CounterEntry.size)
        .where(CounterEntry.repository == repository.lower())
        .order_by(*_NEWEST_FIRST)
    )
    return [CounterEntryInfo(key=key, bytes=size) for key, size in rows]


def entry_body(session: Session, repository: str, key: str) -> bytes | None:
    """The bytes of ``repository``'s entry ``key``, None when it has none (or it was dropped)."""
    return session.scalar(
        select(CounterEntry.body).where(
            CounterEntry.repository == repository.lower(), CounterEntry.key == key
        )
    )


def store_entry(
    session: Session, *, repository: str, key: str, body: bytes, job_id: str, max_bytes: int
) -> int:
    """Keep ``body`` (an entry already checked) as ``repository``'s entry ``key``, in the caller's
    transaction, replacing one of that key; then drop the repository's oldest entries beyond ``max_bytes``.
    Returns how many were dropped. One upsert (PostgreSQL and SQLite alike), so two jobs publishing the
    same key at once both succeed."""
    name = repository.lower()
    new = upsert_insert(session, CounterEntry).values(
        repository=name, key=key, body=body, size=len(body), job_id=job_id, created_at=utcnow()
    )
    replace = {column: new.excluded[column] for column in _REPLACED}
    session.execute(new.on_conflict_do_update(index_elements=["repository", "key"], set_=replace))
    return _drop_oldest(session, name, max_bytes)


def _drop_oldest(session: Session, repository: str, max_bytes: int) -> int:
    rows = session.execute(
        select(CounterEntry.id, CounterEntry.size)
        .where(CounterEntry.repository == repository)
        .order_by(*_NEWEST_FIRST)
    )
    total, dropped = 0, []
    for entry_id, size in rows:
        total += size
        if total > max_bytes:
            dropped.append(entry_id)
    if dropped:
        session.execute(delete(CounterEntry).where(CounterEntry.id.in_(dropped)))
    return len(dropped)

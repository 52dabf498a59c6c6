"""A running job's events on their way to the service: cut to what the worker API takes, numbered.

A build can print thousands of lines at once, and one line can be megabytes long; the API takes at most
MAX_EVENTS_PER_BATCH events of at most MAX_EVENT_CHARS each per call. So a long line is cut (saying how much
was cut), and what arrives at once is sent in batches small enough to store, each with the next number of
this run's sequence: the service stores a batch number once, so a batch sent again after its answer was
lost is not stored twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from intelliperf.contract.worker import MAX_EVENT_CHARS, MAX_EVENTS_PER_BATCH, EventIn
from worker.service_client import ServiceClient

__all__ = ["MAX_BATCH_CHARS", "EventSender", "batches", "cut"]

MAX_BATCH_CHARS = 2**20
"""Characters of messages per batch at most: a request the service parses in milliseconds."""


def cut(message: str) -> str:
    """``message`` within MAX_EVENT_CHARS, its end replaced by a note of how much was left out."""
    if len(message) <= MAX_EVENT_CHARS:
        return message
    note_room = 64
    kept = message[: MAX_EVENT_CHARS - note_room]
    return f"{kept} … ({len(message) - len(kept)} more characters not kept)"


def batches(events: list[EventIn]) -> Iterator[list[EventIn]]:
    """``events`` in order, in batches of at most MAX_EVENTS_PER_BATCH events and MAX_BATCH_CHARS."""
    batch: list[EventIn] = []
    size = 0
    for event in events:
        if batch and (len(batch) == MAX_EVENTS_PER_BATCH or size + len(event.message) > MAX_BATCH_CHARS):
            yield batch
            batch, size = [], 0
        batch.append(event)
        size += len(event.message)
    if batch:
        yield batch


class EventSender:
    """The events of one job run, sent in numbered batches (the numbers continue across calls)."""

    def __init__(self, service: ServiceClient, job_id: str, run_id: str) -> None:
        self.service = service
        self.job_id = job_id
        self.run_id = run_id
        self.next_batch = 0

    def send(self, events: list[tuple[Literal["stage", "log"], str, str | None]]) -> None:
        """(kind, message, stage) events, in order."""
        given = [EventIn(kind=kind, message=cut(message), stage=stage) for kind, message, stage in events]
        for batch in batches(given):
            self.service.events(self.job_id, self.run_id, self.next_batch, batch)
            self.next_batch += 1

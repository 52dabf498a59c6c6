"""The worker's side of the worker API (service/api/worker_api.py): every call the service cannot answer
right now (down, restarting, its database away: connection errors, 502, 503 with Retry-After, 504) is
tried again with backoff (0.5 s doubling to 10 s, or the Retry-After it names) until ``retry_s`` has
passed, so an outage delays a job's claim, events and result instead of losing them."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from intelliperf.contract.worker import (
    ClaimedJob,
    ClaimRequest,
    CounterEntries,
    CounterEntryInfo,
    CounterEntryStored,
    EventIn,
    EventsIn,
    JobResult,
    ReproducerStored,
    WorkerBeat,
)
from intelliperf.service_http import UNAVAILABLE, response_detail, retry_after_s

__all__ = [
    "ContentRefused",
    "Forbidden",
    "JobNotHeld",
    "NotDelivered",
    "NotFound",
    "ServiceClient",
    "ServiceError",
]

log = logging.getLogger(__name__)


class ServiceError(RuntimeError):
    """The service refused a call for good (a bad token, a malformed request), or stayed away too long."""


class JobNotHeld(ServiceError):
    """409: the job is not (or no longer) this run's: finished, cancelled, or taken back by the reaper."""


class Forbidden(ServiceError):
    """403: the service refuses this call to this run (a counter upload of a job that publishes none)."""


class NotDelivered(Forbidden):
    """403 to a claim: the delivery it names is not one of the job's (a forged or foreign message)."""


class NotFound(ServiceError):
    """404: no such job, or no such thing of the job's."""


class ContentRefused(ServiceError):
    """400, 413 or 422: what the request carried was refused; ``reason``: the service's words."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class ServiceClient:
    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        retry_s: float = 3600.0,
        counter_retry_s: float = 30.0,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout_s, transport=transport
        )
        self.retry_s = retry_s
        self.counter_retry_s = counter_retry_s
        """How long the counters' calls wait out an unavailable service: reuse saves time, so a job does not
        wait for it longer than a counter pass would take (it runs without reuse instead)."""

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _call(
        self, what: str, method: str, path: str, *, retry_s: float | None = None, **kwargs: Any
    ) -> httpx.Response:
        deadline = time.monotonic() + (self.retry_s if retry_s is None else retry_s)
        wait = 0.5
        while True:
            try:
                response = self.http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                reason, pause = f"{type(exc).__name__}: {exc}", wait
            else:
                if response.status_code not in UNAVAILABLE:
                    return _checked(what, response)
                reason = f"{response.status_code} {response_detail(response)}"
                pause = retry_after_s(response) or wait
            if time.monotonic() + pause > deadline:
                raise ServiceError(f"{what}: the service did not answer ({reason})")
            log.warning("%s: the service is unavailable (%s); again in %.1f s", what, reason, pause)
            time.sleep(pause)
            wait = min(wait * 2, 10.0)

    def heartbeat(self, name: str, beat: WorkerBeat) -> None:
        self._call("heartbeat", "PUT", f"/v1/worker/workers/{name}", json=beat.model_dump(), retry_s=0)

    def claim(self, job_id: str, worker: str, run_id: str, delivery: str) -> ClaimedJob | None:
        """The job, or None when it is not queued (finished, cancelled, or another run's). ``delivery``: the
        secret of the broker message that brought it; NotDelivered when the service does not know it."""
        body = ClaimRequest(worker=worker, run_id=run_id, delivery=delivery).model_dump()
        try:
            response = self._call(
                f"claiming job {job_id}", "POST", f"/v1/worker/jobs/{job_id}/claim", json=body
            )
        except JobNotHeld:
            return None
        except Forbidden as exc:
            raise NotDelivered(str(exc)) from exc
        return ClaimedJob.model_validate_json(response.content)

    def archive(self, job_id: str, run_id: str) -> bytes:
        what = f"reading the archive of job {job_id}"
        return self._call(what, "GET", f"/v1/worker/jobs/{job_id}/archive", params={"run_id": run_id}).content

    def events(self, job_id: str, run_id: str, batch: int, events: list[EventIn]) -> None:
        """Batch number ``batch`` of this run's events (at most MAX_EVENTS_PER_BATCH): sent again with the
        same number after a lost answer, it is stored once."""
        body = EventsIn(run_id=run_id, batch=batch, events=events).model_dump()
        what = f"writing {len(events)} event(s) of job {job_id}"
        self._call(what, "POST", f"/v1/worker/jobs/{job_id}/events", json=body)

    def result(self, job_id: str, result: JobResult) -> None:
        what = f"writing job {job_id}'s result"
        self._call(what, "POST", f"/v1/worker/jobs/{job_id}/result", json=result.model_dump())

    def reproducer(self, job_id: str, run_id: str, tarball: Path) -> ReproducerStored:
        """Store the job's reproducer (a gzipped tar) with the service; where its user downloads it."""
        what = f"storing job {job_id}'s reproducer"
        response = self._call(
            what, "PUT", f"/v1/worker/jobs/{job_id}/reproducer", params={"run_id": run_id},
            content=_FileChunks(tarball), headers={"Content-Length": str(tarball.stat().st_size),
                                                   "Content-Type": "application/gzip"},
        )  # fmt: skip
        return ReproducerStored.model_validate_json(response.content)

    def counter_entries(self, job_id: str, run_id: str) -> list[CounterEntryInfo]:
        """The counter entries of the job's repository, newest first."""
        what = f"listing the counter entries of job {job_id}"
        response = self._call(
            what, "GET", f"/v1/worker/jobs/{job_id}/counters", params={"run_id": run_id},
            retry_s=self.counter_retry_s,
        )  # fmt: skip
        return CounterEntries.model_validate_json(response.content).entries

    def counter_entry(self, job_id: str, run_id: str, key: str) -> bytes | None:
        """The bytes of the job's repository's entry ``key``, None when it has none (dropped since listed)."""
        what = f"reading counter entry {key} of job {job_id}"
        path = f"/v1/worker/jobs/{job_id}/counters/{key}"
        try:
            return self._call(
                what, "GET", path, params={"run_id": run_id}, retry_s=self.counter_retry_s
            ).content
        except NotFound:
            return None

    def put_counter_entry(self, job_id: str, run_id: str, key: str, body: bytes) -> CounterEntryStored:
        """Publish an entry the job measured; ContentRefused (with the reason) when it is refused."""
        what = f"storing counter entry {key} of job {job_id}"
        response = self._call(
            what, "PUT", f"/v1/worker/jobs/{job_id}/counters/{key}", params={"run_id": run_id},
            content=body, headers={"Content-Type": "application/json"}, retry_s=self.counter_retry_s,
        )  # fmt: skip
        return CounterEntryStored.model_validate_json(response.content)

    def cancel_requested(self, job_id: str, run_id: str) -> bool:
        """Asked every second while a job runs: one try; a cancellation waits for the service."""
        try:
            response = self._call(
                f"asking about job {job_id}", "GET", f"/v1/worker/jobs/{job_id}/cancel",
                params={"run_id": run_id}, retry_s=0,
            )  # fmt: skip
        except JobNotHeld:
            return True  # taken back from this run: stop
        except ServiceError:
            return False
        return bool(response.json().get("cancel"))


class _FileChunks:
    """A file's bytes in chunks, read afresh on each iteration: a retried upload sends it again whole."""

    def __init__(self, path: Path, chunk: int = 1 << 20) -> None:
        self.path, self.chunk = path, chunk

    def __iter__(self) -> Iterator[bytes]:
        with self.path.open("rb") as source:
            while data := source.read(self.chunk):
                yield data


def _checked(what: str, response: httpx.Response) -> httpx.Response:
    if response.status_code == 409:
        raise JobNotHeld(f"{what}: {response_detail(response)}")
    if response.status_code == 403:
        raise Forbidden(f"{what}: {response_detail(response)}")
    if response.status_code == 404:
        raise NotFound(f"{what}: the service answered 404: {response_detail(response)}")
    if response.status_code in (400, 413, 422):
        reason = response_detail(response)
        raise ContentRefused(f"{what}: the service answered {response.status_code}: {reason}", reason)
    if response.is_error:
        raise ServiceError(
            f"{what}: the service answered {response.status_code}: {response_detail(response)}"
        )
    return response

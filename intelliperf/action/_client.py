"""The service's API as the Action uses it: submit, follow the events, read the job, report and diff.

Only httpx and the contract: the Action installs no service code. Every failure is a ServiceError whose
message says what was being done and what the service answered (its ``detail``), never a secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from intelliperf.contract import JobSpec
from intelliperf.service_http import UNAVAILABLE, response_detail, retry_after_s

__all__ = ["SECRET_HEADERS", "Event", "ServiceClient", "ServiceError"]

# what each secret travels as on POST /v1/jobs
SECRET_HEADERS = {"github_token": "X-IntelliPerf-GitHub-Token", "llm_key": "X-IntelliPerf-LLM-Key"}
FINISHED = ("succeeded", "failed", "cancelled")
SUBMIT_TRIES = 4


class ServiceError(RuntimeError):
    """The service could not be reached, refused the request, or answered something unexpected."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Event:
    id: int | None
    kind: str
    data: dict[str, Any]


_WHY = {
    401: "the service token was refused (missing, unknown or revoked: check the service_token input)",
    403: "the service token may not do this",
    404: "not found",
    409: "conflict",
    413: "too large",
    422: "the service refused the job",
    429: "too many requests",
}


class ServiceClient:
    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"User-Agent": "intelliperf-action"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url
        self._http = httpx.Client(
            base_url=base_url, headers=headers, timeout=httpx.Timeout(timeout_s), transport=transport
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, response: httpx.Response, doing: str) -> httpx.Response:
        if response.is_success:
            return response
        why = _WHY.get(response.status_code, "")
        message = f"{doing}: HTTP {response.status_code}"
        if why:
            message += f" ({why})"
        raise ServiceError(f"{message}: {response_detail(response)}", response.status_code)

    def _request(self, method: str, path: str, doing: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise ServiceError(f"{doing}: the service at {self.base_url} did not answer in time") from None
        except httpx.TransportError as exc:
            raise ServiceError(f"{doing}: cannot reach the service at {self.base_url} ({exc})") from None
        return self._check(response, doing)

    def submit(
        self,
        spec: JobSpec,
        *,
        archive: bytes | None,
        secrets: dict[str, str],
        idempotency_key: str | None,
        priority: int | None = None,
        retry_wait_s: float = 1.0,
    ) -> tuple[dict[str, Any], bool]:
        """The job (as the service shows it) and whether this request made it (False: an earlier
        request with the same Idempotency-Key did). Retries refused connections and 502/503/504 only
        with an Idempotency-Key, so a retry never makes a second job; a 429 (the token's limit on uploads
        being checked) always, after its Retry-After: the service recorded nothing."""
        headers = {SECRET_HEADERS[name]: value for name, value in secrets.items() if value}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        params = {"priority": priority} if priority is not None else None
        body = spec.model_dump_json(exclude_defaults=True)
        doing = "submitting the job"
        for attempt in range(1, SUBMIT_TRIES + 1):
            again = attempt < SUBMIT_TRIES
            try:
                if archive is None:
                    response = self._http.post(
                        "/v1/jobs",
                        content=body,
                        headers=headers | {"Content-Type": "application/json"},
                        params=params,
                    )
                else:
                    response = self._http.post(
                        "/v1/jobs",
                        data={"spec": body},
                        files={"archive": ("project.tar.gz", archive, "application/gzip")},
                        headers=headers,
                        params=params,
                    )
            except httpx.TransportError as exc:
                if idempotency_key and again:
                    time.sleep(retry_wait_s * attempt)
                    continue
                if isinstance(exc, httpx.TimeoutException):
                    raise ServiceError(
                        f"{doing}: the service at {self.base_url} did not answer in time"
                    ) from None
                raise ServiceError(f"{doing}: cannot reach the service at {self.base_url} ({exc})") from None
            if response.status_code in UNAVAILABLE and idempotency_key and again:
                time.sleep(retry_after_s(response) or retry_wait_s * attempt)
                continue
            if response.status_code == 429 and again:
                time.sleep(retry_after_s(response) or retry_wait_s * attempt)
                continue
            self._check(response, doing)
            return dict(response.json()), response.status_code == 201
        raise AssertionError("unreachable")  # pragma: no cover

    def job(self, job_id: str) -> dict[str, Any]:
        return dict(self._request("GET", f"/v1/jobs/{job_id}", f"reading job {job_id}").json())

    def report(self, job_id: str) -> dict[str, Any] | None:
        try:
            return dict(self._request("GET", f"/v1/jobs/{job_id}/report", "reading the report").json())
        except ServiceError as exc:
            if exc.status == 404:
                return None
            raise

    def tracking(self, job_id: str) -> dict[str, Any]:
        """The finished job's kernels against the base branch (``GET /v1/jobs/{id}/tracking``)."""
        doing = f"reading job {job_id}'s kernel times against the base branch"
        return dict(self._request("GET", f"/v1/jobs/{job_id}/tracking", doing).json())

    def kernel_series(self, query: dict[str, Any]) -> dict[str, Any]:
        """One kernel's samples and change points (``GET /v1/kernels/series``)."""
        doing = f"reading the series of {query.get('kernel')} in {query.get('repository')}"
        return dict(self._request("GET", "/v1/kernels/series", doing, params=query).json())

    def diff(self, job_id: str) -> str | None:
        try:
            return self._request("GET", f"/v1/jobs/{job_id}/diff", "reading the diff").text
        except ServiceError as exc:
            if exc.status == 404:
                return None
            raise

    def cancel(self, job_id: str) -> None:
        self._request("POST", f"/v1/jobs/{job_id}/cancel", f"cancelling job {job_id}")

    def events(self, job_id: str, *, after: int = 0, read_timeout_s: float = 60.0) -> Iterator[Event]:
        """The job's server-sent events from ``after`` on, until the stream ends (an ``end`` event
        once the job has finished). Raises ServiceError when the stream breaks; resume with the last
        event's id as ``after``."""
        doing = f"following job {job_id}'s events"
        timeout = httpx.Timeout(30.0, read=read_timeout_s)
        try:
            with self._http.stream(
                "GET",
                f"/v1/jobs/{job_id}/events",
                params={"after": after},
                headers={"Accept": "text/event-stream"},
                timeout=timeout,
            ) as response:
                if not response.is_success:
                    response.read()
                    self._check(response, doing)
                event_id: int | None = None
                kind, data = "message", []
                for line in response.iter_lines():
                    if line == "":
                        if data:
                            yield Event(event_id, kind, _parse_data("\n".join(data)))
                        event_id, kind, data = None, "message", []
                    elif line.startswith(":"):
                        yield Event(None, "keep-alive", {})
                    else:
                        name, _, value = line.partition(":")
                        value = value.removeprefix(" ")
                        if name == "event":
                            kind = value
                        elif name == "data":
                            data.append(value)
                        elif name == "id" and value.isdigit():
                            event_id = int(value)
                if data:
                    yield Event(event_id, kind, _parse_data("\n".join(data)))
        except httpx.TimeoutException:
            raise ServiceError(f"{doing}: no word from the service for {read_timeout_s:.0f} s") from None
        except httpx.TransportError as exc:
            raise ServiceError(f"{doing}: the connection to {self.base_url} broke ({exc})") from None


def _parse_data(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"message": text}
    return value if isinstance(value, dict) else {"message": str(value)}

"""The Action's client against a service that says "not now": a 429 (the token's limit on uploads being
checked) is sent again after its Retry-After, with or without an idempotency key, since the service
recorded nothing; a 503 only with a key. A real HTTP server on 127.0.0.1 answers as the service would."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from intelliperf.action._client import SUBMIT_TRIES, ServiceClient, ServiceError
from intelliperf.contract import JobSpec

SPEC = JobSpec.model_validate({"applications": [{"command": "./app"}], "formula": "diagnoseOnly"})
JOB = {"id": "f" * 32, "status": "queued"}


class Service(ThreadingHTTPServer):
    """Answers each POST /v1/jobs with the next of ``answers`` (status, Retry-After), then 201."""

    daemon_threads = True

    def __init__(self, answers: list[tuple[int, str | None]]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.answers = answers
        self.posts: list[float] = []


class _Handler(BaseHTTPRequestHandler):
    server: Service

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.posts.append(time.monotonic())
        status, retry_after = self.server.answers.pop(0) if self.server.answers else (201, None)
        body = json.dumps(JOB if status == 201 else {"detail": f"not now ({status})"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            self.send_header("Retry-After", retry_after)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def service(request: pytest.FixtureRequest) -> Iterator[Service]:
    server = Service(list(request.param))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def submit(service: Service, key: str | None) -> tuple[dict[str, object], bool]:
    with ServiceClient(f"http://127.0.0.1:{service.server_address[1]}", "t") as client:
        return client.submit(SPEC, archive=b"x", secrets={}, idempotency_key=key, retry_wait_s=0.05)


@pytest.mark.parametrize("service", [[(429, "1")]], indirect=True)
@pytest.mark.parametrize("key", [None, "k-1"])
def test_a_429_is_sent_again_after_its_retry_after(service: Service, key: str | None) -> None:
    job, created = submit(service, key)
    assert (job, created) == (JOB, True)
    assert len(service.posts) == 2 and service.posts[1] - service.posts[0] >= 0.95


@pytest.mark.parametrize("service", [[(429, None)] * SUBMIT_TRIES], indirect=True)
def test_a_429_that_lasts_is_the_service_s_refusal(service: Service) -> None:
    with pytest.raises(ServiceError, match=r"HTTP 429 \(too many requests\): not now") as refused:
        submit(service, None)
    assert refused.value.status == 429 and len(service.posts) == SUBMIT_TRIES


@pytest.mark.parametrize("service", [[(503, "0.1")]], indirect=True)
def test_a_503_is_sent_again_only_with_an_idempotency_key(service: Service) -> None:
    with pytest.raises(ServiceError, match="HTTP 503"):
        submit(service, None)
    service.answers = [(503, "0.1")]
    assert submit(service, "k-2") == (JOB, True)
    assert len(service.posts) == 3

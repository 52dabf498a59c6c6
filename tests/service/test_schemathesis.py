"""Schemathesis over the live server's OpenAPI document: every operation, with valid and with invalid
generated requests, answers without a server error, with a documented status code and content type,
and with a body that matches the documented schema. On SQLite and PostgreSQL.

Bounded: a few dozen examples per operation and mode, no shrinking, no example database. A request that is
not valid HTTP at all (negative mode can make a header name out of `8;`) is refused by the HTTP server
(uvicorn: 400 "Invalid HTTP request received.") before the API sees it; such an answer is checked for a
server error only, since no operation can document it."""

from __future__ import annotations

import os
from typing import Any

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase
from schemathesis import APIOperation, Case, GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from service.db.session import Database
from service.job_end import finish
from tests.service.conftest import ADMIN, LiveService

AUTH = {"Authorization": f"Bearer {ADMIN}"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
MAX_EXAMPLES = int(os.environ.get("INTELLIPERF_FUZZ_EXAMPLES", "20"))
SPEC = {"repository": {"url": "https://github.com/acme/kernels.git"}, "applications": [{"command": "./app"}]}


def _fuzz(operation: APIOperation, mode: GenerationMode, **fixed: Any) -> None:
    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @hypothesis.given(case=operation.as_strategy(generation_mode=mode, **fixed))
    def call(case: Case) -> None:
        response = case.call(headers=AUTH)
        checks = [not_a_server_error] if refused_as_malformed_http(response) else CHECKS
        case.validate_response(response, checks=checks)

    call()


HTTP_SERVER_REFUSAL = "Invalid HTTP request received."


def refused_as_malformed_http(response: Any) -> bool:
    """Whether the HTTP server itself refused the request as malformed HTTP (uvicorn's own answer)."""
    return response.status_code == 400 and response.text.strip() == HTTP_SERVER_REFUSAL


def _finished_job(live: LiveService) -> str:
    """A job with a report and a diff, so that the job routes are also fuzzed past their 404."""
    with live.client() as client:
        response = client.post("/v1/jobs", json=SPEC)
        assert response.status_code == 201, response.text
        job_id: str = response.json()["id"]
    database = Database(live.settings.resolved_database_url)
    with database.session() as session:
        finish(
            session,
            job_id,
            status="succeeded",
            outcome="success",
            report={"schema_version": 1},
            diff="--- a/k.cu\n+++ b/k.cu\n@@ -1 +1 @@\n-a\n+b\n",
            speedup=1.5,
        )
    database.dispose()
    return job_id


def test_only_the_http_servers_own_refusal_counts_as_malformed_http(live: LiveService) -> None:
    """The request Schemathesis once made (header names `8;` and `!v`, a Content-Length of `EE;`), sent as
    raw bytes: the HTTP server answers it, not the API; an answer of the API is never taken for that."""
    import socket
    from types import SimpleNamespace

    host, port = live.url.removeprefix("http://").split(":")
    raw = (
        b"POST /v1/jobs/x/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: EE;\r\n8;\r\n!v: D*d\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=10) as connection:
        connection.sendall(raw)
        chunks = []
        while chunk := connection.recv(65536):  # the server closes the connection after its refusal
            chunks.append(chunk)
    answer = b"".join(chunks).decode("latin-1")
    head, _, body = answer.partition("\r\n\r\n")
    status = int(head.split()[1])
    assert refused_as_malformed_http(SimpleNamespace(status_code=status, text=body))
    with live.client() as client:
        api = client.post("/v1/jobs", content=b"{", headers={"Content-Type": "application/json"})
    assert api.status_code in (400, 422)
    assert not refused_as_malformed_http(SimpleNamespace(status_code=api.status_code, text=api.text))


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=str)
def test_every_operation_answers_without_a_server_error_and_as_documented(
    live: LiveService, mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {operation.label for operation in operations}
    assert {"POST /v1/jobs", "GET /v1/jobs/{job_id}/events", "GET /metrics"} <= labels
    job_id = _finished_job(live)
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not list(operation.iter_parameters()):
            continue  # nothing to make invalid
        _fuzz(operation, mode)
        if "{job_id}" in operation.path:
            _fuzz(operation, mode, path_parameters={"job_id": job_id})

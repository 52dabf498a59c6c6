"""Secrets sent with a job (the LLM key, the GitHub token): encrypted at rest, given to the engine only
where the job needs them (the LLM key to a job that optimizes: tests/worker/test_job_isolation.py), never
shown by the API, deleted when the job finishes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import select

from service.db.models import Job, JobEvent, JobSecret
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import LiveService, celery_worker, recorded_example_archive, serve, wait_for

LLM_KEY = "sk-test-0123456789abcdef-very-secret"
GITHUB_TOKEN = "ghp_testtoken_0123456789abcdefghijkl"
# a diagnosis calls no LLM: its build fails if the engine's environment holds the job's LLM key or
# GitHub token anywhere (searched by their hashes, so the spec does not carry them)
CHECKS_KEY = {
    "applications": [{"command": "./bin/transpose"}],
    "formula": "diagnoseOnly",
    "replay": "profile",
    "build_command": "! env -0 | tr '\\0' '\\n' | cut -d= -f2- | while read -r v; do "
    'printf %s "$v" | sha256sum | cut -c1-64; done | grep -q -e '
    + hashlib.sha256(LLM_KEY.encode()).hexdigest()
    + " -e "
    + hashlib.sha256(GITHUB_TOKEN.encode()).hexdigest(),
}
SECRETS = {"X-IntelliPerf-LLM-Key": LLM_KEY, "X-IntelliPerf-GitHub-Token": GITHUB_TOKEN}


def post(live: LiveService, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    with live.client() as client:
        response = client.post(
            "/v1/jobs",
            data={"spec": json.dumps(CHECKS_KEY)},
            files={"archive": ("p.tar.gz", recorded_example_archive(), "application/gzip")},
            headers=headers,
        )
    return response.status_code, response.json()


def test_without_a_secret_key_the_service_refuses_secrets_and_records_nothing(live: LiveService) -> None:
    code, body = post(live, SECRETS)
    assert code == 422
    assert {tuple(d["loc"]) for d in body["detail"]} == {("header", h) for h in SECRETS}  # type: ignore[union-attr]
    assert "INTELLIPERF_SECRET_KEY" in body["detail"][0]["msg"]  # type: ignore[index]
    database = Database(live.settings.resolved_database_url)
    with database.session() as session:
        assert session.scalars(select(Job)).all() == []
    database.dispose()


@pytest.mark.parametrize("database_url", ["sqlite", "postgresql"], indirect=True)
def test_secrets_reach_the_engine_only_and_are_deleted_when_the_job_ends(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    settings = settings_for(database_url, secret_key="the-service-keeps-this")
    database = Database(settings.resolved_database_url)
    with serve(settings) as live:
        code, body = post(live, SECRETS)
        assert code == 201
        job_id = str(body["id"])
        with database.session() as session:
            stored = {row.name: row.ciphertext for row in session.scalars(select(JobSecret))}
        assert set(stored) == {"llm_key", "github_token"}
        assert all(LLM_KEY.encode() not in c and GITHUB_TOKEN.encode() not in c for c in stored.values())
        log = tmp_path / "worker.log"  # the worker has no key: the service reads the secrets for its claim
        with celery_worker(settings, "w-secrets", log), live.client() as client:
            state = wait_for(
                lambda: (
                    (s := client.get(f"/v1/jobs/{job_id}").json())["status"] in ("succeeded", "failed") and s
                )
            )
            seen = [
                client.get(f"/v1/jobs/{job_id}").text,
                client.get("/v1/jobs").text,
                client.get(f"/v1/jobs/{job_id}/events", params={"follow": "false"}).text,
                client.get(f"/v1/jobs/{job_id}/report").text,
            ]
    assert state["status"] == "succeeded", state  # type: ignore[index]  # the build saw no secret
    with database.session() as session:
        assert session.scalars(select(JobSecret)).all() == []
        messages = " ".join(e.message for e in session.scalars(select(JobEvent)))
    database.dispose()
    for text in [*seen, messages, log.read_text()]:
        assert LLM_KEY not in text and GITHUB_TOKEN not in text


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_secrets_the_service_can_no_longer_read_fail_the_job_with_that_reason(
    settings_for: Callable[..., ServiceSettings], database_url: str, tmp_path: Path
) -> None:
    """The job's secrets were stored under one key; the service now runs with another (a rotated key)."""
    settings = settings_for(database_url, secret_key="the-first-key")
    with serve(settings, dispatch=False) as live:
        job_id = str(post(live, SECRETS)[1]["id"])
    rotated = settings.model_copy(update={"secret_key": SecretStr("a-rotated-key")})
    with (
        serve(rotated) as live,
        celery_worker(rotated, "w-rotated", tmp_path / "worker.log"),
        live.client() as client,
    ):
        state = wait_for(lambda: (s := client.get(f"/v1/jobs/{job_id}").json())["status"] == "failed" and s)
    assert state["outcome"] == "worker_error"  # type: ignore[index]
    assert "is not the one it was stored with" in state["error"]  # type: ignore[index]

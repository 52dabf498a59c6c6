"""The jobs API over a real server, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

from service.db.models import Job, JobArchive
from tests.service.conftest import LiveService, project_archive

GIT_SPEC = {
    "repository": {"url": "https://github.com/acme/kernels.git"},
    "applications": [{"command": "./app"}],
}


def test_a_submitted_job_is_recorded_queued_and_listed(live: LiveService) -> None:
    with live.client() as client:
        response = client.post("/v1/jobs", json=GIT_SPEC, params={"priority": 7})
        assert response.status_code == 201, response.text
        job = response.json()
        assert response.headers["Location"] == f"/v1/jobs/{job['id']}"
        assert job["status"] == "queued"
        assert job["queue"] == "gpu.nvidia.any"
        assert job["repository"] == "acme/kernels"
        assert job["priority"] == 7
        assert job["spec"]["applications"][0]["command"] == ["./app"]
        listed = client.get("/v1/jobs", params={"repository": "acme/kernels"}).json()
        assert [item["id"] for item in listed["items"]] == [job["id"]]
        assert client.get("/v1/jobs", params={"status": "running"}).json()["total"] == 0
        assert client.get(f"/v1/jobs/{job['id']}").json()["id"] == job["id"]


def test_an_idempotency_key_returns_the_first_job_and_refuses_another_spec(live: LiveService) -> None:
    with live.client() as client:
        first = client.post("/v1/jobs", json=GIT_SPEC, headers={"Idempotency-Key": "run-42"})
        again = client.post("/v1/jobs", json=GIT_SPEC, headers={"Idempotency-Key": "run-42"})
        other = client.post(
            "/v1/jobs", json={**GIT_SPEC, "formula": "bankConflict"}, headers={"Idempotency-Key": "run-42"}
        )
        assert (first.status_code, again.status_code, other.status_code) == (201, 200, 409)
        assert again.json()["id"] == first.json()["id"]
        assert again.headers["Idempotent-Replayed"] == "true"
        assert first.json()["id"] in other.json()["detail"]
        assert client.get("/v1/jobs").json()["total"] == 1


def test_an_uploaded_archive_is_kept_with_its_job_in_the_database(live: LiveService) -> None:
    from service.db.session import Database

    archive = project_archive({"Makefile": "all:\n\ttrue\n", "src/app.cu": "// kernel\n"})
    spec = {"applications": [{"command": "./app"}], "formula": "diagnoseOnly"}
    with live.client() as client:
        response = client.post(
            "/v1/jobs",
            data={"spec": json.dumps(spec)},
            files={"archive": ("project.tar.gz", archive, "application/gzip")},
        )
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    assert response.json()["source"] == "archive"
    database = Database(live.settings.resolved_database_url)
    with database.session() as session:
        assert session.get(JobArchive, job_id).data == archive
        assert session.get(Job, job_id).status in ("queued", "running")
    database.dispose()

"""A token's scope is matched literally but for its '*': a '_' or '%' in it is no LIKE wildcard in the job
list (service.jobs._visible escapes them), on SQLite and PostgreSQL, as for one job (fnmatch)."""

from __future__ import annotations

from intelliperf.contract import JobSpec
from service.auth import ADMIN, create_token, hash_secret
from service.db.models import ApiToken
from service.db.session import Database
from service.jobs import submit
from tests.service.conftest import LiveService

SPEC = {"applications": [{"command": "./app"}]}
REPOSITORIES = ["acme/kAx", "acme/k_x", "acme/k%x", "acme/kxx"]
PERCENT_SECRET = "ipt_" + "p" * 43


def test_underscore_and_percent_in_a_scope_match_only_themselves(live: LiveService, db: Database) -> None:
    jobs: dict[str, str] = {}
    with db.session() as session:
        for repository in REPOSITORIES:
            spec = JobSpec.model_validate({**SPEC, "repository": {"url": f"https://github.com/{repository}"}})
            # recorded directly: the API refuses '%' in a repository name (and validate_scope in a scope),
            # so the escape is the only thing between such a row and a wildcard
            job, _ = submit(session, spec, principal=ADMIN, repository=repository)
            jobs[repository] = job.id
        _, underscore_secret = create_token(session, "underscore", ["acme/k_x"])
        session.add(
            ApiToken(
                name="percent",
                prefix=PERCENT_SECRET[:8],
                secret_hash=hash_secret(PERCENT_SECRET),
                repositories=["acme/k%x"],
            )
        )
    for secret, own in ((underscore_secret, "acme/k_x"), (PERCENT_SECRET, "acme/k%x")):
        with live.client(secret) as client:
            listed = client.get("/v1/jobs").json()
            assert [item["repository"] for item in listed["items"]] == [own], listed
            assert listed["total"] == 1
            for repository, job_id in jobs.items():
                expected = 200 if repository == own else 404
                assert client.get(f"/v1/jobs/{job_id}").status_code == expected, (own, repository)
    with live.client() as admin:
        assert admin.get("/v1/jobs").json()["total"] == len(REPOSITORIES)

"""Bad input to the jobs API, on SQLite and PostgreSQL: each refusal is a clear 4xx whose message names
the field or archive member at fault, and a refused submission leaves no job, archive or event behind."""

from __future__ import annotations

import contextlib
import io
import json
import random
import tarfile
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from service.auth import create_token, revoke_token
from service.db.models import Job, JobArchive, JobEvent, JobSecret
from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import LiveService, project_archive, serve

SPEC: dict[str, Any] = {
    "repository": {"url": "https://github.com/acme/kernels.git"},
    "applications": [{"command": "./app"}],
}
UPLOAD_SPEC = {"applications": [{"command": "./app"}], "formula": "diagnoseOnly"}
ARCHIVE = project_archive({"Makefile": "all:\n\ttrue\n", "src/app.cu": "// kernel\n"})
UNKNOWN_ID = "0123456789abcdef0123456789abcdef"
BOUNDARY = "intelliperf-test-boundary"


def counts(db: Database) -> tuple[int, int, int, int]:
    """Rows of jobs, archives, events and job secrets."""
    with db.session() as session:
        return tuple(  # type: ignore[return-value]
            session.scalar(select(func.count()).select_from(table)) or 0
            for table in (Job, JobArchive, JobEvent, JobSecret)
        )


def errors(response: httpx.Response) -> list[dict[str, Any]]:
    detail = response.json()["detail"]
    assert isinstance(detail, list), detail
    return detail


def locs(response: httpx.Response) -> list[list[str]]:
    return [[str(part) for part in error["loc"]] for error in errors(response)]


def post_spec(client: httpx.Client, body: bytes | str | Any, **kwargs: Any) -> httpx.Response:
    content = body if isinstance(body, bytes | str) else json.dumps(body)
    headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
    return client.post("/v1/jobs", content=content, headers=headers, **kwargs)


def upload(
    client: httpx.Client,
    spec: Any = UPLOAD_SPEC,
    archive: bytes | None = ARCHIVE,
    headers: dict[str, str] | None = None,
    **extra: str,
) -> httpx.Response:
    """A multipart/form-data submission, built by hand so that any part may be left out."""
    parts: list[tuple[str, str | None, bytes]] = []
    if spec is not None:
        parts.append(("spec", None, (spec if isinstance(spec, str) else json.dumps(spec)).encode()))
    if archive is not None:
        parts.append(("archive", "project.tar.gz", archive))
    parts += [(name, None, value.encode()) for name, value in extra.items()]
    body = b""
    for name, filename, value in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        body += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    body += f"--{BOUNDARY}--\r\n".encode()
    content_type = f"multipart/form-data; boundary={BOUNDARY}"
    return client.post("/v1/jobs", content=body, headers={"Content-Type": content_type, **(headers or {})})


def tar_gz(add: Callable[[tarfile.TarFile], None]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        add(archive)
    return buffer.getvalue()


def _file(archive: tarfile.TarFile, name: str, data: bytes = b"x") -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def _link(archive: tarfile.TarFile, name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    archive.addfile(info)


def _device(archive: tarfile.TarFile) -> None:
    _file(archive, "Makefile")
    info = tarfile.TarInfo("dev/sda")
    info.type, info.devmajor, info.devminor = tarfile.BLKTYPE, 8, 0
    archive.addfile(info)


def _fifo(archive: tarfile.TarFile) -> None:
    info = tarfile.TarInfo("pipe")
    info.type = tarfile.FIFOTYPE
    archive.addfile(info)


@contextlib.contextmanager
def live_client(settings: ServiceSettings) -> Iterator[httpx.Client]:
    with serve(settings, dispatch=False) as live, live.client() as client:
        yield client


@pytest.fixture
def client(live: LiveService) -> Iterator[httpx.Client]:
    with live.client() as c:
        yield c


# (case, body, the error's loc, words its message must hold)
MALFORMED_SPECS: list[tuple[str, bytes | str | Any, list[str], str]] = [
    ("malformed JSON", b'{"applications": [', ["body"], "Invalid JSON"),
    ("not UTF-8", b'{"applications": "\xff\xfe"}', ["body"], "Invalid JSON"),
    ("a list, not an object", [SPEC], ["body"], "should be an object"),
    ("applications is a number", {**SPEC, "applications": 3}, ["body", "applications"], "valid array"),
    ("top_n is text", {**SPEC, "top_n": "ten"}, ["body", "top_n"], "valid integer"),
    ("top_n too large", {**SPEC, "top_n": 10**30}, ["body", "top_n"], "less than or equal to 100"),
    ("in_place is not a boolean", {**SPEC, "in_place": "maybe"}, ["body", "in_place"], "valid boolean"),
    (
        "command is an object",
        {**SPEC, "applications": [{"command": {"a": 1}}]},
        ["body", "applications", "0", "command"],
        "valid array",
    ),
    ("unknown field", {**SPEC, "colour": "red"}, ["body", "colour"], "Extra inputs are not permitted"),
    (
        "unknown nested field",
        {**SPEC, "llm": {"temperatur": 1}},
        ["body", "llm", "temperatur"],
        "Extra inputs",
    ),
    ("missing applications", {"repository": SPEC["repository"]}, ["body", "applications"], "Field required"),
    ("no applications", {**SPEC, "applications": []}, ["body", "applications"], "at least 1 item"),
    (
        "invalid regex in kernel",
        {**SPEC, "kernel": "transpose(["},
        ["body", "kernel"],
        "not a valid regular expression",
    ),
    (
        "invalid regex in an application's kernel",
        {**SPEC, "applications": [{"command": "./app", "kernel": "*x"}]},
        ["body", "applications", "0", "kernel"],
        "not a valid regular expression",
    ),
    ("unknown api_version", {**SPEC, "api_version": "v0"}, ["body", "api_version"], "intelliperf.dev/v1"),
    (
        "Infinity",
        b'{"applications": [{"command": "./a"}], "timeouts": {"run_s": Infinity}}',
        ["body", "timeouts", "run_s"],
        "finite number",
    ),
    ("NaN as text", {**SPEC, "tolerances": {"atol": "NaN"}}, ["body", "tolerances", "atol"], "finite number"),
    (
        "project_directory leaves",
        {**SPEC, "project_directory": "a/../.."},
        ["body", "project_directory"],
        "'..'",
    ),
    (
        "credentials in the URL",
        {**SPEC, "repository": {"url": "https://u:p@github.com/a/b"}},
        ["body", "repository", "url"],
        "credentials",
    ),
    (
        "NUL in the URL",
        {**SPEC, "repository": {"url": "https://github.com/acme/ker\x00nels"}},
        ["body", "repository", "url"],
        "owner/name",
    ),
    (
        "URL too long",
        {**SPEC, "repository": {"url": "https://github.com/acme/" + "k" * 300}},
        ["body", "repository", "url"],
        "owner/name",
    ),
    (
        "URL without owner",
        {**SPEC, "repository": {"url": "https://github.com/kernels"}},
        ["body", "repository", "url"],
        "owner/name",
    ),
    ("gpu.arch too long", {**SPEC, "gpu": {"arch": "sm_" + "9" * 100}}, ["body", "gpu", "arch"], "too long"),
    (
        "gpu.vendor unknown",
        {**SPEC, "gpu": {"vendor": "intel"}},
        ["body", "gpu", "vendor"],
        "unknown GPU vendor 'intel'; the installed backends: nvidia, amd",
    ),
    ("no source", {"applications": [{"command": "./app"}]}, ["body", "repository"], "uploaded archive"),
    (
        "formula unknown",
        {**SPEC, "formula": "bankConflicts"},
        ["body", "formula"],
        "unknown formula 'bankConflicts'",
    ),
    (
        "application formula unknown",
        {**SPEC, "applications": [{"command": "./app", "formula": "spills"}]},
        ["body", "applications", "0", "formula"],
        "choose one of: bankConflict, atomicContention",
    ),
]


def test_a_malformed_spec_is_refused_naming_the_field(
    client: httpx.Client, db: Database, subtests: pytest.Subtests
) -> None:
    for case, body, loc, words in MALFORMED_SPECS:
        with subtests.test(case):
            response = post_spec(client, body)
            assert response.status_code == 422, response.text
            assert loc in locs(response), response.text
            assert any(words in e["msg"] for e in errors(response) if e["loc"] == loc), response.text
            assert not any(e["msg"].startswith("Value error") for e in errors(response)), response.text
            assert counts(db) == (0, 0, 0, 0)


BAD_PARAMETERS: list[tuple[dict[str, Any], dict[str, Any], list[str]]] = [
    ({"priority": 10}, {}, ["query", "priority"]),
    ({"priority": -1}, {}, ["query", "priority"]),
    ({"priority": "high"}, {}, ["query", "priority"]),
    ({}, {"Idempotency-Key": ""}, ["header", "idempotency-key"]),
    ({}, {"Idempotency-Key": "k" * 201}, ["header", "idempotency-key"]),
    ({}, {"Idempotency-Key": "two words"}, ["header", "idempotency-key"]),
    ({}, {"Idempotency-Key": "cl\u00e9".encode()}, ["header", "idempotency-key"]),
]


def test_a_bad_priority_or_idempotency_key_is_refused_naming_it(
    client: httpx.Client, db: Database, subtests: pytest.Subtests
) -> None:
    for params, headers, loc in BAD_PARAMETERS:
        with subtests.test(f"{params} {headers}"):
            response = post_spec(client, SPEC, params=params, headers=headers)
            assert response.status_code == 422, response.text
            assert loc in locs(response)
            assert counts(db) == (0, 0, 0, 0)


def test_unsupported_content_types_and_oversized_specs_are_refused(
    client: httpx.Client, db: Database
) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        response = client.post("/v1/jobs", content=json.dumps(SPEC), headers=headers)
        assert response.status_code == 415, (content_type, response.text)
        assert "application/json" in response.json()["detail"]
    padded = {**SPEC, "build_command": "make " + "x" * 2**20}
    response = post_spec(client, padded)
    assert response.status_code == 413, response.text
    assert "job spec exceeds" in response.json()["detail"]
    assert counts(db) == (0, 0, 0, 0)


def test_a_valid_spec_is_still_accepted(client: httpx.Client, db: Database) -> None:
    """The control: what the other tests send differs from this only where they say."""
    assert (
        post_spec(client, SPEC, params={"priority": 9}, headers={"Idempotency-Key": "ok-1"}).status_code
        == 201
    )
    assert upload(client).status_code == 201
    assert counts(db) == (2, 1, 2, 0)


# (case, archive, words in the message)
HOSTILE_ARCHIVES: list[tuple[str, bytes, str]] = [
    ("absolute path", tar_gz(lambda t: _file(t, "/etc/cron.d/evil")), "'/etc/cron.d/evil': absolute paths"),
    ("dot-dot", tar_gz(lambda t: _file(t, "src/../../evil")), "'src/../../evil': '..' is not allowed"),
    ("escaping symlink", tar_gz(lambda t: _link(t, "src/link", "../../etc/passwd")), "'src/link': the link"),
    ("absolute symlink", tar_gz(lambda t: _link(t, "passwd", "/etc/passwd")), "'passwd': links to absolute"),
    ("escaping hard link", tar_gz(lambda t: _link(t, "h", "../x", tarfile.LNKTYPE)), "'h': the link"),
    ("device file", tar_gz(_device), "'dev/sda': only files, folders and links"),
    ("fifo", tar_gz(_fifo), "'pipe': only files, folders and links"),
    ("not a gzip", b"PK\x03\x04 this is a zip, not a tar.gz", "not a readable tar.gz"),
    ("truncated gzip", ARCHIVE[: len(ARCHIVE) // 2], "not a readable tar.gz"),
    ("empty archive", tar_gz(lambda t: None), "the archive is empty"),
]


def test_a_hostile_archive_is_refused_naming_the_member(
    client: httpx.Client, db: Database, subtests: pytest.Subtests
) -> None:
    for case, archive, words in HOSTILE_ARCHIVES:
        with subtests.test(case):
            response = upload(client, archive=archive)
            assert response.status_code == 422, response.text
            assert locs(response) == [["body", "archive"]]
            assert words in errors(response)[0]["msg"], response.text
            assert counts(db) == (0, 0, 0, 0)


def test_a_malformed_upload_is_refused_naming_the_form_field(client: httpx.Client, db: Database) -> None:
    response = upload(client, spec=None)
    assert (response.status_code, locs(response)) == (422, [["body", "spec"]]), response.text
    response = upload(client, archive=None)
    assert (response.status_code, locs(response)) == (422, [["body", "archive"]]), response.text
    response = upload(client, spec=None, archive=None)
    assert response.status_code == 422, response.text
    response = upload(client, spec="{not json")
    assert (response.status_code, locs(response)) == (422, [["body", "spec"]]), response.text
    response = upload(client, spec={**UPLOAD_SPEC, "top_n": 0})
    assert (response.status_code, locs(response)) == (422, [["body", "spec", "top_n"]]), response.text
    response = upload(client, colour="red")
    assert (response.status_code, locs(response)) == (422, [["body", "colour"]]), response.text
    assert "unknown form field" in errors(response)[0]["msg"]
    response = client.post("/v1/jobs", content=b"--x\r\n", headers={"Content-Type": "multipart/form-data"})
    assert response.status_code == 400, response.text
    assert "multipart" in response.json()["detail"]
    assert counts(db) == (0, 0, 0, 0)


def test_an_oversized_archive_is_refused_before_anything_is_written(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database
) -> None:
    limit = 4096
    with (
        serve(settings_for(database_url, max_upload_bytes=limit), dispatch=False) as live,
        live.client() as client,
    ):
        big = project_archive({"data.bin": random.Random(0).randbytes(2 * limit)})  # incompressible
        assert len(big) > limit
        response = upload(client, archive=big)
        assert response.status_code == 413, response.text
        assert response.json()["detail"] == f"archive: the upload exceeds the limit of {limit} bytes"
        # past the limit the middleware enforces on every body, the request is cut off while it streams
        response = upload(client, archive=b"\0" * (limit + 2**20 + 1))
        assert response.status_code == 413, response.text
        assert "request body exceeds" in response.json()["detail"]
        assert upload(client).status_code == 201  # the small one still goes through
    assert counts(db) == (1, 1, 1, 0)


JOB_ROUTES = [
    ("GET", "/v1/jobs/{}"),
    ("GET", "/v1/jobs/{}/report"),
    ("GET", "/v1/jobs/{}/diff"),
    ("GET", "/v1/jobs/{}/events"),
    ("POST", "/v1/jobs/{}/cancel"),
]


def test_unknown_job_ids_are_404_on_every_job_route(client: httpx.Client) -> None:
    for job_id in (UNKNOWN_ID, "nope", "a%00b", "x" * 5000, "%F0%9F%92%A5"):
        for method, route in JOB_ROUTES:
            response = client.request(method, route.format(job_id))
            assert response.status_code == 404, (method, route, job_id, response.text)
            assert response.json()["detail"].startswith("no job '"), response.text
    response = client.get(f"/v1/jobs/{UNKNOWN_ID}")
    assert UNKNOWN_ID in response.json()["detail"]


def test_a_job_without_report_or_diff_and_a_finished_job_refuse_clearly(client: httpx.Client) -> None:
    job_id = post_spec(client, SPEC).json()["id"]
    for route in ("report", "diff"):
        response = client.get(f"/v1/jobs/{job_id}/{route}")
        assert response.status_code == 404
        assert response.json()["detail"] == f"job {job_id} has no {route} (it is queued)"
    assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
    response = client.post(f"/v1/jobs/{job_id}/cancel")
    assert response.status_code == 409
    assert "already finished (cancelled)" in response.json()["detail"]


def test_list_filters_refuse_bad_values_naming_them(client: httpx.Client) -> None:
    for params, loc in [
        ({"status": "exploded"}, ["query", "status"]),
        ({"limit": 0}, ["query", "limit"]),
        ({"limit": 201}, ["query", "limit"]),
        ({"offset": -1}, ["query", "offset"]),
        ({"repository": "a\x00b"}, ["query", "repository"]),
        ({"queue": "gpu\x00"}, ["query", "queue"]),
        ({"repository": "r" * 201}, ["query", "repository"]),
    ]:
        response = client.get("/v1/jobs", params=params)
        assert response.status_code == 422, (params, response.text)
        assert loc in locs(response), response.text
    response = client.get(f"/v1/jobs/{UNKNOWN_ID}/events", params={"after": -1})
    assert response.status_code == 422 and ["query", "after"] in locs(response)
    response = client.get(f"/v1/jobs/{UNKNOWN_ID}/events", headers={"Last-Event-ID": "soon"})
    assert response.status_code == 422 and ["header", "last-event-id"] in locs(response)


AUTHENTICATED_ROUTES = [
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs"),
    ("GET", "/v1/workers"),
    ("GET", "/metrics"),
] + [(method, route.format(UNKNOWN_ID)) for method, route in JOB_ROUTES]


def test_missing_wrong_and_revoked_tokens_are_401_everywhere(live: LiveService, db: Database) -> None:
    with db.session() as session:
        token, revoked = create_token(session, "gone", ["*"])
        revoke_token(session, token.id)
    headers_cases = {
        "missing": {},
        "wrong": {"Authorization": "Bearer ipt_" + "x" * 43},
        "not a token": {"Authorization": "Bearer hunter2"},
        "revoked": {"Authorization": f"Bearer {revoked}"},
        "basic": {"Authorization": "Basic dXNlcjpwYXNz"},
        "empty bearer": {"Authorization": "Bearer"},
    }
    with httpx.Client(base_url=live.url, timeout=30) as anonymous:
        for case, headers in headers_cases.items():
            for method, route in AUTHENTICATED_ROUTES:
                kwargs: dict[str, Any] = {"json": SPEC} if method == "POST" else {}
                response = anonymous.request(method, route, headers=headers, **kwargs)
                assert response.status_code == 401, (case, method, route, response.text)
                assert response.headers["WWW-Authenticate"] == "Bearer"
                assert "token" in response.json()["detail"]
        detail = anonymous.get("/v1/jobs", headers=headers_cases["revoked"]).json()["detail"]
        assert detail == "unknown or revoked token"
    assert counts(db) == (0, 0, 0, 0)


def test_a_token_scoped_to_another_repository_sees_and_submits_nothing_of_it(
    live: LiveService, db: Database
) -> None:
    with db.session() as session:
        _, other = create_token(session, "other-ci", ["other/*"])
        _, mixed_case = create_token(session, "acme-ci", ["Acme/*"])
    with live.client() as admin, live.client(other) as scoped, live.client(mixed_case) as acme:
        acme_job = post_spec(admin, SPEC).json()["id"]
        assert counts(db) == (1, 0, 1, 0)
        response = post_spec(scoped, SPEC)
        assert response.status_code == 403, response.text
        assert response.json()["detail"] == "token 'other-ci' is scoped to other/*, not to acme/kernels"
        response = upload(scoped)  # an archive names no repository: only a '*' token may send one
        assert response.status_code == 403, response.text
        assert "needs scope '*'" in response.json()["detail"]
        assert counts(db) == (1, 0, 1, 0)
        for method, route in JOB_ROUTES:
            response = scoped.request(method, route.format(acme_job), params={"follow": "false"})
            assert response.status_code == 404, (route, response.text)
        assert scoped.get("/v1/jobs").json()["total"] == 0
        assert scoped.get("/v1/jobs", params={"repository": "acme/kernels"}).json()["items"] == []
        own = post_spec(scoped, {**SPEC, "repository": {"url": "https://github.com/other/tools"}})
        assert own.status_code == 201, own.text
        assert [item["id"] for item in scoped.get("/v1/jobs").json()["items"]] == [own.json()["id"]]
        # scopes match case-insensitively, for one job as for the list, on both databases
        assert acme.get(f"/v1/jobs/{acme_job}").status_code == 200
        assert [item["id"] for item in acme.get("/v1/jobs").json()["items"]] == [acme_job]
        assert admin.get("/v1/jobs").json()["total"] == 2


def test_a_refused_submission_keeps_none_of_its_secrets(
    settings_for: Callable[..., ServiceSettings], database_url: str, db: Database
) -> None:
    secrets = {"X-IntelliPerf-GitHub-Token": "ghp_" + "s" * 36, "X-IntelliPerf-LLM-Key": "sk-" + "k" * 40}
    with live_client(settings_for(database_url)) as client:  # no secret key: secrets are refused, by name
        response = post_spec(client, SPEC, headers=secrets)
        assert response.status_code == 422, response.text
        assert sorted(loc[1].lower() for loc in locs(response)) == sorted(name.lower() for name in secrets)
        assert "INTELLIPERF_SECRET_KEY" in errors(response)[0]["msg"]
    with db.session() as session:
        _, scoped = create_token(session, "other-ci", ["other/*"])
    with live_client(settings_for(database_url, secret_key="k" * 32)) as client:
        assert post_spec(client, {**SPEC, "top_n": 0}, headers=secrets).status_code == 422
        assert upload(client, archive=HOSTILE_ARCHIVES[0][1], headers=secrets).status_code == 422
        refused = post_spec(client, SPEC, headers={**secrets, "Authorization": f"Bearer {scoped}"})
        assert refused.status_code == 403, refused.text
        assert counts(db) == (0, 0, 0, 0)
        assert post_spec(client, SPEC, headers=secrets).status_code == 201  # the control
        assert counts(db) == (1, 0, 1, 2)


def test_a_spec_of_two_applications_is_refused_at_submit_with_the_way_out(
    live: LiveService, db: Database
) -> None:
    """Accepted, it would be queued and then fail on a GPU node: refused here instead, nothing recorded."""
    two = {**SPEC, "applications": [{"command": ["./a"]}, {"command": ["./b"]}]}
    before = counts(db)
    with live.client() as client:
        response = post_spec(client, two)
    assert response.status_code == 422
    assert locs(response) == [["body", "applications"]]
    message = errors(response)[0]["msg"]
    assert "one job per application" in message and "this spec has 2" in message
    assert counts(db) == before

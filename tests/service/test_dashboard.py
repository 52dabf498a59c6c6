"""The operators' dashboard over a real server, on SQLite and PostgreSQL: login, visibility, rendering,
escaping. The browser test (test_dashboard_browser.py) covers the live parts."""

from __future__ import annotations

import contextlib
import html
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from markupsafe import escape

from service.auth import create_token, revoke_token
from service.dashboard.session import COOKIE
from service.db.models import Job
from service.db.session import Database
from service.job_end import finish
from service.jobs import add_event
from service.reproducers import reproducer_path
from service.settings import ServiceSettings
from tests.service.conftest import ADMIN, LiveService, serve

ROOT = Path(__file__).resolve().parents[2]
REPORT = json.loads((ROOT / "benchmarks/results/loop/transpose_bank/report.json").read_text())
SUMMARY = (ROOT / "benchmarks/results/loop/transpose_bank/summary.md").read_text()
HOSTILE = "<script>alert('pwned')</script>"


def spec(repository: str, command: str = "./app", name: str | None = None) -> dict[str, object]:
    app: dict[str, object] = {"command": [command]}
    if name is not None:
        app["name"] = name
    return {"repository": {"url": f"https://github.com/{repository}.git"}, "applications": [app]}


def submit(live: LiveService, repository: str, **kwargs: str) -> str:
    with live.client() as client:
        response = client.post("/v1/jobs", json=spec(repository, **kwargs))
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def browser(live: LiveService) -> httpx.Client:
    """A client with no bearer header: only what a browser would send."""
    return httpx.Client(base_url=live.url, timeout=30, follow_redirects=False)


@contextlib.contextmanager
def login(live: LiveService, token: str) -> Iterator[httpx.Client]:
    with browser(live) as client:
        response = client.post("/login", data={"token": token, "next": "/"})
        assert response.status_code == 303, response.text
        assert response.headers["location"] == "/"
        yield client


@pytest.fixture
def database(live: LiveService) -> Iterator[Database]:
    db = Database(live.settings.resolved_database_url)
    yield db
    db.dispose()


def test_every_page_needs_a_login(live: LiveService) -> None:
    job_id = submit(live, "acme/kernels")
    with browser(live) as client:
        first = client.get("/")
        assert first.status_code == 303 and first.headers["location"] == "/login"
        page = client.get(f"/jobs/{job_id}")
        assert page.status_code == 303 and page.headers["location"] == f"/login?next=/jobs/{job_id}"
        assert client.get(f"/jobs/{job_id}/events").status_code == 401
        assert client.get(f"/jobs/{job_id}/report.json").status_code == 401
        assert client.get("/?part=body").status_code == 303
        # a cookie that is not a token is no login either
        client.cookies.set(COOKIE, "ipt_made-up")
        assert client.get("/").status_code == 303
        form = client.get("/login")
        assert form.status_code == 200 and 'name="token"' in form.text
        assert "default-src 'none'" in form.headers["content-security-policy"]


def test_a_bad_token_is_refused_and_not_echoed(live: LiveService) -> None:
    secret = "ipt_not-a-real-token-" + "x" * 20
    with browser(live) as client:
        response = client.post("/login", data={"token": secret, "next": "/"})
        assert response.status_code == 401
        assert "unknown or revoked token" in response.text
        assert secret not in response.text
        assert COOKIE not in response.headers.get("set-cookie", "")
        assert client.get("/").status_code == 303


def test_the_login_cookie_is_httponly_strict_and_never_rendered(live: LiveService) -> None:
    with browser(live) as client:
        response = client.post("/login", data={"token": ADMIN, "next": "/jobs/abc?x=1"})
        assert response.status_code == 303 and response.headers["location"] == "/jobs/abc?x=1"
        cookie = response.headers["set-cookie"].lower()
        assert cookie.startswith(f"{COOKIE}=")
        assert "httponly" in cookie and "samesite=strict" in cookie and "path=/" in cookie
        page = client.get("/")
        assert page.status_code == 200
        assert ADMIN not in page.text
        assert "admin" in page.text
        # the JSON API is bearer-only: the dashboard's cookie opens nothing there
        assert client.get("/v1/jobs").status_code == 401
        assert client.post("/logout").status_code == 303
        assert client.get("/").status_code == 303


def test_the_cookie_holds_a_session_that_logout_and_revocation_end(
    live: LiveService, database: Database
) -> None:
    """Not the API token: a server-side session, so a copy of the cookie dies with a logout, and a revoked
    token ends its sessions."""
    with database.session() as session:
        token, secret = create_token(session, "acme-ci", ["acme/*"])
    with login(live, secret) as client:
        cookie = client.cookies[COOKIE]
        assert cookie.startswith("ips_") and secret not in cookie and ADMIN not in cookie
        assert client.get("/").status_code == 200
        client.post("/logout")
    with browser(live) as stolen:  # the cookie as it was before the logout
        stolen.cookies.set(COOKIE, cookie)
        assert stolen.get("/").status_code == 303
    with login(live, secret) as client:
        assert client.get("/").status_code == 200
        with database.session() as session:
            revoke_token(session, token.id)
        assert client.get("/").status_code == 303
        assert client.get("/jobs/x/events").status_code == 401


def test_login_never_redirects_off_site_nor_accepts_a_cross_site_post(live: LiveService) -> None:
    with browser(live) as client:
        for target in ("https://evil.example/", "//evil.example/", "/\\evil.example", "javascript:x"):
            response = client.post("/login", data={"token": ADMIN, "next": target})
            assert response.headers["location"] == "/", target
        cross = client.post("/login", data={"token": ADMIN}, headers={"Origin": "https://evil.example"})
        assert cross.status_code == 403
        assert COOKIE not in cross.headers.get("set-cookie", "")


def test_a_scoped_token_sees_only_its_repositories_jobs(live: LiveService, database: Database) -> None:
    mine = submit(live, "acme/kernels", command="./mine")
    theirs = submit(live, "other/secret-repo", command="./theirs")
    with database.session() as session:
        _, secret = create_token(session, "acme-ci", ["acme/*"])
    with login(live, secret) as client:
        page = client.get("/").text
        assert "acme/kernels" in page and f"/jobs/{mine}" in page
        assert "other/secret-repo" not in page and theirs not in page
        assert "acme-ci" in page and secret not in page
        body = client.get("/?part=body").text
        assert "acme/kernels" in body and "other/secret-repo" not in body
        assert client.get(f"/jobs/{mine}").status_code == 200
        hidden = client.get(f"/jobs/{theirs}")
        assert hidden.status_code == 404 and "other/secret-repo" not in hidden.text
        assert client.get(f"/jobs/{theirs}/events").status_code == 404
        assert client.get(f"/jobs/{theirs}/report.json").status_code == 404
    with login(live, ADMIN) as client:
        page = client.get("/").text
        assert "acme/kernels" in page and "other/secret-repo" in page


def test_the_overview_shows_jobs_queue_depth_and_counts(live: LiveService) -> None:
    first = submit(live, "acme/kernels", command="./transpose")
    submit(live, "acme/kernels", command="./histogram")
    with login(live, ADMIN) as client:
        page = client.get("/").text
    assert f'data-job="{first}" data-status="queued"' in page
    assert "./transpose" in page and "./histogram" in page
    assert 'data-queue="gpu.nvidia.any"' in page
    depth = page.split('data-queue="gpu.nvidia.any"')[1].split('class="num depth">')[1].split("<")[0]
    assert depth == "2"
    assert 'data-count="queued">2<' in page


def test_the_job_page_renders_fields_report_summary_and_diff(live: LiveService, database: Database) -> None:
    job_id = submit(live, "acme/kernels", command="./bin/transpose")
    with database.session() as session:
        add_event(session, job_id, "log", "timing pass: 3 kernels", stage="timing")
        finish(
            session,
            job_id,
            status="succeeded",
            outcome="success",
            report=REPORT,
            diff=REPORT["diff"],
            summary=SUMMARY,
            speedup=REPORT["best"]["speedup"]["median"],
        )
    with login(live, ADMIN) as client:
        response = client.get(f"/jobs/{job_id}")
        report = client.get(f"/jobs/{job_id}/report.json")
        diff = client.get(f"/jobs/{job_id}/diff.txt")
    assert response.status_code == 200
    page = response.text
    assert job_id in page and "acme/kernels" in page and "./bin/transpose" in page
    assert 'data-status="succeeded"' in page and "success" in page
    assert "timing pass: 3 kernels" in page  # the log so far, server-rendered
    assert 'data-finished="true"' in page
    # top kernels, the selected one marked; the diagnosis with its hot line; the best result
    assert html.escape("transpose_tiled(float const*, float*, int, int)") in page
    assert '<tr class="selected">' in page
    assert "bankConflict" in page and 'class="hot"' in page
    assert html.escape("tile[threadIdx.x][threadIdx.y + j];") in page
    speedup = REPORT["best"]["speedup"]
    assert f"{speedup['median']:.2f}\N{MULTIPLICATION SIGN}" in page
    assert f"[{speedup['low']:.3f}, {speedup['high']:.3f}]" in page
    assert "excessive shared-memory wavefronts" in page
    # the summary rendered from Markdown, the diff with its lines classified
    markdown = page.split('<div class="markdown">')[1].split("</div>")[0]
    assert "<h2>IntelliPerf: Shared-memory bank conflicts in <code>transpose_tiled(" in markdown
    assert "<h3>Bottleneck</h3>" in markdown and "<strong>high</strong>" in markdown
    # one way to write a number: the summary's and the page's own tables alike
    before = f"{int(REPORT['best']['metric_before']):,}"
    assert before in markdown and page.count(before) > markdown.count(before)
    assert 'class="d-add"' in page and 'class="d-del"' in page
    assert report.json() == REPORT
    assert diff.text == REPORT["diff"]


def test_user_supplied_text_is_escaped_everywhere(live: LiveService, database: Database) -> None:
    job_id = submit(live, "acme/kernels", command=f"./{HOSTILE}", name="<img src=x onerror=alert(1)>")
    with database.session() as session:
        # The API refuses such a repository name; the dashboard must not rely on that.
        session.get(Job, job_id).repository = f"acme/{HOSTILE}"
        add_event(session, job_id, "log", f"compiler said {HOSTILE}")
        finish(
            session,
            job_id,
            status="failed",
            outcome="build_failed",
            error=f"make: *** {HOSTILE}",
            summary=f"# Result\n\n{HOSTILE}\n\n<sub onclick=alert(1)>x</sub>\n\n[click](javascript:alert(1))",
            diff=f"--- a/x.cu\n+++ b/x.cu\n@@ -1 +1 @@\n-{HOSTILE}\n+<b>bold</b>\n",
        )
    with login(live, ADMIN) as client:
        pages = [client.get("/").text, client.get("/?part=body").text, client.get(f"/jobs/{job_id}").text]
    for page in pages:
        assert "<script>alert" not in page
        assert "<img src=x" not in page
    job_page = pages[2]
    for page in pages[:2]:
        assert f"acme/{escape(HOSTILE)!s}" in page
        assert str(escape("<img src=x onerror=alert(1)>")) in page
    assert f"acme/{escape(HOSTILE)!s}" in job_page
    assert str(escape("<img src=x onerror=alert(1)>")) in job_page
    assert f"./{escape(HOSTILE)!s}" in job_page  # the command, in the spec
    assert "compiler said &lt;script&gt;" in job_page
    assert "make: *** &lt;script&gt;" in job_page
    markdown = job_page.split('class="markdown"')[1].split("</section>")[0]
    assert "<h1>Result</h1>" in markdown and "&lt;script&gt;" in markdown
    assert "href" not in markdown  # the javascript: link stays text
    assert "<sub onclick" not in markdown and "&lt;sub onclick=alert(1)&gt;" in markdown
    assert "<b>bold</b>" not in job_page and "+&lt;b&gt;bold&lt;/b&gt;" in job_page


@pytest.mark.parametrize(
    ("trusted", "always", "expected"),
    [
        ("127.0.0.1", False, True),  # the proxy (here: this test, on 127.0.0.1) is trusted: HTTPS seen
        ("10.9.9.9", False, False),  # an untrusted hop's X-Forwarded-Proto is ignored: plain HTTP seen
        ("10.9.9.9", True, True),  # the operator says users come over HTTPS
    ],
)
def test_the_cookie_is_secure_behind_a_tls_proxy(
    settings: ServiceSettings, trusted: str, always: bool, expected: bool
) -> None:
    """A TLS-terminating proxy forwards plain HTTP with X-Forwarded-Proto: https (the real uvicorn server,
    with the options `intelliperf serve` gives it)."""
    tuned = settings.model_copy(update={"forwarded_allow_ips": trusted, "secure_cookies": always})
    with serve(tuned) as live, browser(live) as client:
        response = client.post(
            "/login",
            data={"token": ADMIN, "next": "/"},
            headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"},
        )
        assert response.status_code == 303
        attributes = [part.strip().lower() for part in response.headers["set-cookie"].split(";")]
        assert ("secure" in attributes) is expected
        session = response.cookies[COOKIE]
        client.cookies.clear()  # a Secure cookie is not sent over plain HTTP: send it as the proxy would
        logout = client.post(
            "/logout", headers={"Cookie": f"{COOKIE}={session}", "X-Forwarded-Proto": "https"}
        )
        dropped = [part.strip().lower() for part in logout.headers["set-cookie"].split(";")]
        assert ("secure" in dropped) is expected


def test_the_job_page_offers_the_reproducer_the_service_keeps(live: LiveService, database: Database) -> None:
    mine = submit(live, "acme/kernels", command="./mine")
    theirs = submit(live, "other/secret-repo", command="./theirs")
    kept = {}
    for job_id in (mine, theirs):
        path = reproducer_path(live.settings.data_dir, job_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        kept[job_id] = f"reproducer of {job_id}".encode() * 60_000
        path.write_bytes(kept[job_id])
    bare = submit(live, "acme/kernels", command="./bare")
    with database.session() as session:
        _, secret = create_token(session, "acme-ci", ["acme/*"])
    with login(live, secret) as client:
        page = client.get(f"/jobs/{mine}").text
        live_part = client.get(f"/jobs/{mine}?part=live").text
        download = client.get(f"/jobs/{mine}/reproducer.tar.gz")
        assert client.get(f"/jobs/{theirs}/reproducer.tar.gz").status_code == 404  # another scope's job
        assert client.get(f"/jobs/{bare}/reproducer.tar.gz").status_code == 404  # none kept
        assert 'id="reproducer"' not in client.get(f"/jobs/{bare}").text
    with browser(live) as anonymous:
        assert anonymous.get(f"/jobs/{mine}/reproducer.tar.gz").status_code == 401
    size = f"{len(kept[mine]) / 2**20:.1f} MiB"
    for text in (page, live_part):
        assert f'href="/jobs/{mine}/reproducer.tar.gz"' in text and size in text
        assert "intelliperf replay reproducer" in text
    assert download.status_code == 200 and download.content == kept[mine]
    assert f'filename="intelliperf-reproducer-{mine}.tar.gz"' in download.headers["content-disposition"]

"""The dashboard in a real headless Chromium, against a real server and a real Celery worker process.

Log in, see a job submitted through the API appear queued, open its page, start a worker and watch the
job run: the live log grows, the state changes on both pages without a reload, and the report appears.
Screenshots go to $INTELLIPERF_TEST_ARTIFACTS (default: <repo>/.artifacts/). SQLite only: the database
paths are covered on both databases by test_dashboard.py; this test is about the browser.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from service.db.session import Database
from service.settings import ServiceSettings
from tests.service.conftest import (
    ADMIN,
    ROOT,
    LiveService,
    celery_worker,
    recorded_example_archive,
    serve,
)
from tests.service.test_kernel_series import H100, TRANSPOSE, history_with_a_step

playwright_sync = pytest.importorskip("playwright.sync_api")

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
REPLAY_SPEC = {
    "applications": [{"command": "./bin/transpose"}],
    "formula": "diagnoseOnly",
    "replay": "profile",
}
TIMEOUT_MS = 60_000


def artifacts() -> Path:
    folder = Path(os.environ.get("INTELLIPERF_TEST_ARTIFACTS") or ROOT / ".artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def sqlite_live(settings_for: Callable[..., ServiceSettings], tmp_path: Path) -> Iterator[LiveService]:
    with serve(settings_for(f"sqlite:///{tmp_path / 'intelliperf.db'}")) as service:
        yield service


@pytest.fixture
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing (apt-get install -y chromium; scripts/services-up installs it)")
    with playwright_sync.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Watched:
    """A browser context on the live service, with what its pages tried to reach elsewhere and their
    script errors."""

    context: Any
    outside: list[str]
    errors: list[str]

    def page(self) -> Any:
        page = self.context.new_page()
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        return page


def watched(browser: object, live: LiveService, width: int) -> Watched:
    context = browser.new_context(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
    context.set_default_timeout(TIMEOUT_MS)
    outside: list[str] = []
    context.on("request", lambda r: None if r.url.startswith(live.url) else outside.append(r.url))
    return Watched(context, outside, [])


def test_a_submitted_job_appears_runs_and_reports_live(
    sqlite_live: LiveService, browser: object, tmp_path: Path
) -> None:
    live = sqlite_live
    session = watched(browser, live, 1440)
    outside, errors = session.outside, session.errors
    overview = session.page()

    # Login: the first visit lands on the form; a token brings the overview.
    overview.goto(live.url + "/")
    assert overview.url == live.url + "/login"
    overview.fill("#token", ADMIN)
    overview.click("button[type=submit]")
    overview.wait_for_url(live.url + "/")
    assert overview.locator("h1").inner_text() == "Jobs, queues and workers"
    assert overview.locator("[data-count=queued]").inner_text() == "0"
    assert ADMIN not in overview.content()
    overview.evaluate("document.body.dataset.marker = 'same document'")  # a reload would lose this

    # A job submitted through the API appears, queued, without a reload.
    with live.client() as client:
        response = client.post(
            "/v1/jobs",
            data={"spec": json.dumps(REPLAY_SPEC)},
            files={"archive": ("project.tar.gz", recorded_example_archive(), "application/gzip")},
        )
    assert response.status_code == 201, response.text
    job_id = response.json()["id"]
    row = overview.locator(f"tr[data-job='{job_id}']")
    row.wait_for()
    assert row.get_attribute("data-status") == "queued"
    assert "./bin/transpose" in row.inner_text()
    assert overview.locator("[data-queue='gpu.nvidia.any'] .depth").inner_text() == "1"

    # Its page: the fields and the log so far.
    job_page = session.page()
    job_page.goto(f"{live.url}/jobs/{job_id}")
    assert job_page.locator(".fields").get_attribute("data-status") == "queued"
    assert "queued on gpu.nvidia.any" in job_page.locator("#log").inner_text()
    job_page.wait_for_function("document.getElementById('log-state').textContent === 'live'")

    # A real worker runs it: the log grows live, both pages change state by themselves.
    with celery_worker(live.settings, "browser-worker", tmp_path / "worker.log"):
        job_page.locator("#log .line", has_text="started on browser-worker").wait_for()
        job_page.locator(".fields[data-status=succeeded]").wait_for()
        job_page.locator("table.kernels").wait_for()
        overview.locator(f"tr[data-job='{job_id}'][data-status='succeeded']").wait_for()
        overview.locator("tr[data-worker='browser-worker'] .alive").wait_for()

    log = job_page.locator("#log").inner_text()
    assert log.index("queued on") < log.index("started on browser-worker") < log.index("succeeded")
    assert job_page.locator("#log-state").inner_text() == "complete"
    kernels = job_page.locator("table.kernels").inner_text()
    assert "transpose" in kernels
    assert job_page.locator(".diagnosis").count() >= 1
    assert job_page.locator("pre.source .hot").count() >= 1
    finished_row = overview.locator(f"tr[data-job='{job_id}']")
    assert "diagnosed" in finished_row.inner_text()
    assert overview.evaluate("document.body.dataset.marker") == "same document"
    assert overview.locator("[data-count=succeeded]").inner_text() == "1"

    folder = artifacts()
    overview.screenshot(path=str(folder / "dashboard-overview.png"), full_page=True)
    job_page.screenshot(path=str(folder / "dashboard-job.png"), full_page=True)
    shutil.copy(tmp_path / "worker.log", folder / "dashboard-worker.log")

    overview.close()

    # Logging out ends the session: the job page now asks for a login.
    job_page.click("button:has-text('Log out')")
    job_page.wait_for_url(live.url + "/login")
    job_page.goto(f"{live.url}/jobs/{job_id}")
    assert job_page.url.startswith(live.url + "/login?next=")

    assert errors == []
    assert outside == []


def test_a_kernels_series_is_a_chart_with_its_change_point_marked(
    sqlite_live: LiveService, browser: object
) -> None:
    """Ten commits of one kernel, 25% slower from the sixth: in Chromium, the series page shows ten points
    on a line, one change marker between the fifth and the sixth, and its row in the table."""
    live = sqlite_live
    db = Database(live.settings.resolved_database_url)
    try:
        history_with_a_step(db)
    finally:
        db.dispose()
    session = watched(browser, live, 1280)
    page = session.page()
    page.goto(live.url + "/login")
    page.fill("#token", ADMIN)
    page.click("button[type=submit]")
    page.wait_for_url(live.url + "/")
    query = urlencode({"repository": "acme/kernels", "kernel": TRANSPOSE, "device": H100})
    page.goto(f"{live.url}/kernels/series?{query}")
    chart = page.locator("svg.series-chart")
    box = chart.bounding_box()
    assert box is not None and box["width"] > 600 and box["height"] > 200
    points = page.locator("svg.series-chart circle.sample")
    assert points.count() == 10
    xs = [points.nth(i).bounding_box()["x"] for i in range(10)]  # type: ignore[index]
    ys = [points.nth(i).bounding_box()["y"] for i in range(10)]  # type: ignore[index]
    assert xs == sorted(xs)
    assert max(ys[5:]) < min(ys[:5])  # the slower commits drawn higher up
    (marker,) = page.locator("svg.series-chart line.change").all()
    marker_x = marker.bounding_box()["x"]  # type: ignore[index]
    assert xs[4] < marker_x < xs[5]
    assert page.locator(f"table.changes tr[data-commit='{5:07x}']").count() == 1
    assert session.errors == [] and session.outside == []
    page.screenshot(path=str(artifacts() / "dashboard-kernel-series.png"), full_page=True)
    session.context.close()

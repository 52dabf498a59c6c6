"""Kernel samples: a finished job's report records each kernel's time once, the series API reads them back
in time order within the token's scope, old samples are pruned, and the migration goes both ways. On SQLite
and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import pytest
from alembic import command
from pydantic import SecretStr, ValidationError
from sqlalchemy import event as sqlalchemy_event
from sqlalchemy import func, inspect, select, text, update
from sqlalchemy.exc import InvalidRequestError

from intelliperf.contract import (
    Application,
    DeviceInfo,
    Diagnosis,
    JobSpec,
    RankedKernel,
    Report,
    RepositoryRef,
    ReusedCounters,
    TrackSettings,
)
from intelliperf.contract.worker import JobResult
from intelliperf.jobqueue import make_celery
from service.auth import ADMIN, create_token
from service.db.migrate import alembic_config
from service.db.models import Job, JobEvent, KernelSample
from service.db.session import Database
from service.dispatch import Dispatcher
from service.job_end import finish
from service.jobs import repository_name, submit
from service.kernel_samples import kernel_series, prune_samples
from service.secrets import SecretBox, load_secrets, store_secrets
from service.settings import ServiceSettings
from tests.service.conftest import ADMIN as ADMIN_TOKEN
from tests.service.conftest import WORKER_TOKEN, LiveService
from tests.service.test_worker_api import deliver
from tests.support.databases import assert_migration_adds
from tests.support.reports import make_diagnosis, make_kernel
from worker.service_client import ServiceClient

H100 = "NVIDIA H100 80GB HBM3"
MI300X = "AMD Instinct MI300X"
TRANSPOSE = "_Z15transpose_tiledPKfPfii"
INIT = "_Z11init_matrixPfmj"
SORT = "_ZN3cub18DeviceRadixSortKernelIfEEvPKfPfi"


TRANSPOSE_CODE = "d41d3674da58c5de"
TRANSPOSE_SHAPE = "5d2a0c3e9b7f1a64"


def kernel(
    rank: int,
    name: str,
    median_ns: float,
    *,
    library: bool = False,
    code_hash: str | None = None,
    shape_hash: str | None = None,
    launch_ns: list[int] | None = None,
) -> RankedKernel:
    demangled = f"{name[4:]}(…)"
    made = make_kernel(rank, name, median_ns=median_ns, launches=20, library=library, demangled=demangled)
    return made.model_copy(
        update={"code_hash": code_hash, "shape_hash": shape_hash, "launch_ns": launch_ns or []}
    )


def diagnosis(kernel_name: str, formula: str, *locations: tuple[str, int]) -> Diagnosis:
    return make_diagnosis(
        kernel_name, formula, present=bool(locations), saving_ns=0.0, saving_fraction=0.0, summary="",
        reasoning="", locations=locations,
    )  # fmt: skip


def report(
    transpose_ns: float = 80_960.5,
    device: str | None = H100,
    transpose_code: str = TRANSPOSE_CODE,
    reused: bool = False,
) -> dict[str, Any]:
    """A report as the engine writes one: two project kernels and a library kernel (CUB); ``reused``: the
    transpose kernel's counters came from an earlier job."""
    reused_counters = [
        ReusedCounters(
            kernel=TRANSPOSE,
            code_hash=transpose_code,
            shape_hash=TRANSPOSE_SHAPE,
            commit="c0ffee0",
            measured_at=datetime(2026, 11, 1, tzinfo=UTC),
            saved_s=3.5,
        )
    ]
    return Report(
        intelliperf_version="1.0.0",
        device=DeviceInfo(name=device, arch="sm_90") if device else None,
        application=["./transpose"],
        project_directory=".",
        formula_requested="auto",
        kernels=[
            kernel(
                1,
                TRANSPOSE,
                transpose_ns,
                code_hash=transpose_code,
                shape_hash=TRANSPOSE_SHAPE,
                launch_ns=transpose_launches(transpose_ns),
            ),
            kernel(2, SORT, 30_000.0, library=True),
            kernel(3, INIT, 40_768.0),
        ],
        diagnoses=[
            diagnosis(TRANSPOSE, "memoryAccess"),  # no location: the next diagnosis's first one counts
            diagnosis(TRANSPOSE, "bankConflict", ("transpose.cu", 59), ("transpose.cu", 61)),
            diagnosis(INIT, "bankConflict"),
        ],
        reused_counters=reused_counters if reused else [],
    ).model_dump(mode="json")


def transpose_launches(median_ns: float) -> list[int]:
    """The 20 launches' durations a timing pass of the transpose kernel kept: its median and a slow first."""
    return [round(median_ns * 1.5), *([round(median_ns)] * 19)]


def spec(repository: str = "acme/kernels", commit: str | None = None, ref: str = "main") -> JobSpec:
    return JobSpec(
        repository=RepositoryRef(url=f"https://github.com/{repository}.git", ref=ref, commit=commit),
        applications=[Application(command=["./transpose"])],
    )


def finished_job(db: Database, job_spec: JobSpec, job_report: dict[str, Any] | None) -> str:
    """A job submitted for ``job_spec``'s repository and finished with ``job_report``, as the worker API
    finishes one."""
    repository = repository_name(job_spec.repository.url) if job_spec.repository else None
    archive = None if job_spec.repository else b"project"
    with db.session() as session:
        job, _ = submit(session, job_spec, principal=ADMIN, repository=repository, archive=archive)
    with db.session() as session:
        finish(session, job.id, status="succeeded", outcome="diagnosed", report=job_report)
    return job.id


def samples(db: Database, job_id: str | None = None) -> list[KernelSample]:
    with db.session() as session:
        query = select(KernelSample).order_by(KernelSample.id)
        if job_id is not None:
            query = query.where(KernelSample.job_id == job_id)
        return list(session.scalars(query))


def test_a_finished_jobs_report_records_each_project_kernel_once(live: LiveService, db: Database) -> None:
    """Through the worker API, as a worker ends a job; the result sent again, or the job's end recorded
    again, doubles nothing."""
    with live.client() as client:
        submitted = client.post("/v1/jobs", json=spec(commit="c0ffee1").model_dump(mode="json"))
        assert submitted.status_code == 201, submitted.text
        job_id = submitted.json()["id"]
        result = JobResult(run_id="run-1", status="succeeded", outcome="diagnosed", report=report())
        with ServiceClient(live.url, WORKER_TOKEN, retry_s=0) as api:
            assert api.claim(job_id, "w-1", "run-1", deliver(live.settings, job_id)) is not None
            api.result(job_id, result)
            api.result(job_id, result)  # its first answer lost
        finished_at = datetime.fromisoformat(client.get(f"/v1/jobs/{job_id}").json()["finished_at"])
    recorded = samples(db, job_id)
    assert [s.kernel for s in recorded] == [TRANSPOSE, INIT]  # the library kernel (CUB) is not sampled
    transpose, init = recorded
    assert (transpose.repository, transpose.commit, transpose.ref, transpose.device) == (
        "acme/kernels",
        "c0ffee1",
        "main",
        H100,
    )
    assert (transpose.demangled, transpose.location, init.location) == (
        "transpose_tiledPKfPfii(…)",
        "transpose.cu:59",
        None,
    )
    assert (transpose.launches, transpose.median_ns, transpose.total_ns) == (20, 80_960.5, 1_619_210)
    assert transpose.mean_ns == pytest.approx(81_770.105)
    assert (transpose.code_hash, init.code_hash) == (TRANSPOSE_CODE, None)  # init's module was not seen
    assert (transpose.shape_hash, init.shape_hash) == (TRANSPOSE_SHAPE, None)
    assert (transpose.counters_reused, init.counters_reused) == (False, False)  # both profiled, this job
    assert (transpose.launch_ns, init.launch_ns) == ([121_441, *[80_960] * 19], None)  # init's: none kept
    assert transpose.created_at == init.created_at == finished_at
    with db.session() as session:  # the job's end recorded once more (a reaper, a retried transaction)
        finish(session, job_id, status="succeeded", outcome="diagnosed", report=report(transpose_ns=1.0))
    assert [(s.id, s.median_ns) for s in samples(db, job_id)] == [(s.id, s.median_ns) for s in recorded]


def test_a_sample_says_whether_its_kernel_s_counters_were_reused_or_not_profiled(db: Database) -> None:
    job_id = finished_job(db, spec(commit="c0ffee2"), report(reused=True))
    by_kernel = {s.kernel: s for s in samples(db, job_id)}
    assert (by_kernel[TRANSPOSE].counters_reused, by_kernel[INIT].counters_reused) == (True, False)
    unprofiled = {**report(), "diagnoses": []}  # a kernel listed but not profiled (under 5% of GPU time)
    other = finished_job(db, spec(commit="c0ffee3"), unprofiled)
    assert {s.kernel: s.counters_reused for s in samples(db, other)} == {TRANSPOSE: None, INIT: None}


def test_a_report_that_does_not_parse_keeps_the_jobs_end_and_records_no_samples(db: Database) -> None:
    broken = {**report(), "kernels": [{"rank": 0, "name": TRANSPOSE}]}
    for malformed in ({"schema_version": 1}, broken):
        job_id = finished_job(db, spec(), malformed)
        with db.session() as session:
            job = session.get(Job, job_id)
            assert job is not None
            assert (job.status, job.outcome, job.report) == ("succeeded", "diagnosed", malformed)
        assert samples(db, job_id) == []
    # a kernel whose name the database could not key (too long, or a NUL PostgreSQL refuses) is left out,
    # the others are recorded
    odd = report()
    odd["kernels"] += [
        {**odd["kernels"][0], "name": "_Z" + "x" * 2000},
        {**odd["kernels"][0], "name": "_Z1k\x00"},
        {**odd["kernels"][0], "demangled": "k\x00()"},  # the same kernel twice: recorded once
    ]
    job_id = finished_job(db, spec(), odd)
    assert [s.kernel for s in samples(db, job_id)] == [TRANSPOSE, INIT]
    assert samples(db, finished_job(db, spec(), None)) == []  # no report, no samples


def test_samples_the_database_refuses_cost_the_samples_not_the_jobs_end(db: Database) -> None:
    with db.session() as session:
        session.execute(text("DROP TABLE kernel_samples"))  # any refusal: here, the table is gone
    sent = report()
    job_id = finished_job(db, spec(), sent)
    with db.session() as session:
        job = session.get(Job, job_id)
        assert job is not None and (job.status, job.report) == ("succeeded", sent)
        assert (
            session.scalar(select(func.count()).select_from(JobEvent).where(JobEvent.job_id == job_id)) == 2
        )


def test_an_archive_job_and_a_job_without_a_device_are_sampled_without_them(db: Database) -> None:
    archive_job = finished_job(db, JobSpec(applications=[Application(command=["./t"])]), report())
    assert {(s.repository, s.commit, s.ref) for s in samples(db, archive_job)} == {(None, None, None)}
    no_device = finished_job(db, spec(ref="v1.2"), report(device=None))
    assert {(s.commit, s.ref, s.device) for s in samples(db, no_device)} == {("v1.2", "v1.2", None)}


def test_the_series_api_reads_a_kernels_samples_in_time_order(live: LiveService, db: Database) -> None:
    jobs = [
        finished_job(db, spec(commit="aaaaaaa"), report(transpose_ns=100.0)),
        finished_job(db, spec(commit="bbbbbbb"), report(transpose_ns=90.0)),
        finished_job(db, spec(commit="bbbbbbb"), report(transpose_ns=95.0, device=MI300X)),
        finished_job(db, spec(commit="ccccccc", ref="feature"), report(transpose_ns=70.0)),
        finished_job(db, spec("other/tools", commit="ddddddd"), report(transpose_ns=1.0)),
    ]
    repository = {"repository": "acme/kernels"}
    with live.client() as client:
        series = client.get("/v1/kernels/series", params={**repository, "kernel": TRANSPOSE})
        assert series.status_code == 200, series.text
        body = series.json()
        assert (body["repository"], body["kernel"], body["device"], body["total"]) == (
            "acme/kernels",
            TRANSPOSE,
            None,
            4,
        )
        assert [(p["commit"], p["job_id"], p["median_ns"]) for p in body["items"]] == [
            ("aaaaaaa", jobs[0], 100.0),
            ("bbbbbbb", jobs[1], 90.0),
            ("bbbbbbb", jobs[2], 95.0),
            ("ccccccc", jobs[3], 70.0),
        ]
        times = [datetime.fromisoformat(p["created_at"]) for p in body["items"]]
        assert times == sorted(times)
        assert body["items"][3] | {"created_at": None} == {
            "commit": "ccccccc",
            "ref": "feature",
            "job_id": jobs[3],
            "created_at": None,
            "device": H100,
            "launches": 20,
            "median_ns": 70.0,
            "mean_ns": pytest.approx(70.7),
            "code_hash": TRANSPOSE_CODE,
            "shape_hash": TRANSPOSE_SHAPE,
            "counters_reused": False,
            "launch_ns": None,  # asked for only
        }
        with_launches = client.get(
            "/v1/kernels/series", params={**repository, "kernel": TRANSPOSE, "launches": "true"}
        ).json()
        assert [p["launch_ns"] for p in with_launches["items"]] == [
            transpose_launches(ns) for ns in (100.0, 90.0, 95.0, 70.0)
        ]
        assert with_launches["items"][3] | {"launch_ns": None} == body["items"][3]
        on_h100 = client.get(
            "/v1/kernels/series", params={**repository, "kernel": TRANSPOSE, "device": H100, "limit": 2}
        ).json()  # the newest two, oldest first
        assert (on_h100["total"], [p["job_id"] for p in on_h100["items"]]) == (3, [jobs[1], jobs[3]])

        kernels = client.get("/v1/kernels", params=repository)
        assert kernels.status_code == 200, kernels.text
        listed = kernels.json()
        assert (listed["repository"], listed["total"], listed["limit"], listed["offset"]) == (
            "acme/kernels",
            4,
            100,
            0,
        )
        by_key = {(k["kernel"], k["device"]): k for k in listed["items"]}
        assert list(by_key) == [(INIT, MI300X), (INIT, H100), (TRANSPOSE, MI300X), (TRANSPOSE, H100)]
        assert by_key[TRANSPOSE, H100] == {
            "kernel": TRANSPOSE,
            "demangled": "transpose_tiledPKfPfii(…)",
            "location": "transpose.cu:59",
            "device": H100,
            "samples": 3,
            "first_commit": "aaaaaaa",
            "first_at": series.json()["items"][0]["created_at"],
            "last_commit": "ccccccc",
            "last_at": series.json()["items"][3]["created_at"],
            "latest_median_ns": 70.0,
        }
        assert (by_key[INIT, MI300X]["samples"], by_key[INIT, MI300X]["first_commit"]) == (1, "bbbbbbb")
        page = client.get("/v1/kernels", params={**repository, "limit": 1, "offset": 3}).json()
        assert (page["total"], [k["kernel"] for k in page["items"]]) == (4, [TRANSPOSE])
        assert [k["device"] for k in page["items"]] == [H100]

        nothing = [
            ("/v1/kernels", {"repository": "acme/nothing"}, "no kernel samples for repository acme/nothing"),
            (
                "/v1/kernels/series",
                {**repository, "kernel": "_Z4gonev"},
                "no samples of kernel '_Z4gonev' in repository acme/kernels",
            ),
            (
                "/v1/kernels/series",
                {**repository, "kernel": TRANSPOSE, "device": "NVIDIA A100"},
                f"no samples of kernel {TRANSPOSE!r} in repository acme/kernels on device 'NVIDIA A100'",
            ),
        ]
        for path, params, message in nothing:
            response = client.get(path, params=params)
            assert (response.status_code, response.json()["detail"]) == (404, message), path
        for bad in ("acme", "acme/kernels/extra", "https://github.com/acme/kernels", "acme/ker nels", ""):
            for path in ("/v1/kernels", "/v1/kernels/series"):
                response = client.get(path, params={"repository": bad, "kernel": TRANSPOSE})
                assert response.status_code == 422, (bad, path, response.text)
                assert ["query", "repository"] in [e["loc"] for e in response.json()["detail"]]
        for limit in (0, 5001):
            response = client.get(
                "/v1/kernels/series", params={**repository, "kernel": TRANSPOSE, "limit": limit}
            )
            assert response.status_code == 422, response.text
    with live.client(token=None) as anonymous:
        assert anonymous.get("/v1/kernels", params=repository).status_code == 401


def test_a_token_reads_only_the_kernels_of_its_repositories(live: LiveService, db: Database) -> None:
    finished_job(db, spec(commit="aaaaaaa"), report())
    finished_job(db, spec("other/tools", commit="bbbbbbb"), report())
    with db.session() as session:
        _, other = create_token(session, "other-ci", ["other/*"])
        _, acme = create_token(session, "acme-ci", ["Acme/*"])  # scopes match case-insensitively
    with live.client(other) as scoped, live.client(acme) as owner:
        for path, params, owners_answer in (
            ("/v1/kernels", {"repository": "acme/kernels"}, 200),
            ("/v1/kernels/series", {"repository": "acme/kernels", "kernel": TRANSPOSE}, 200),
            ("/v1/kernels", {"repository": "acme/nothing"}, 404),  # refused alike: nothing is told
        ):
            refused = scoped.get(path, params=params)
            assert refused.status_code == 403, refused.text
            expected = f"token 'other-ci' is scoped to other/*, not to {params['repository']}"
            assert refused.json()["detail"] == expected
            assert owner.get(path, params=params).status_code == owners_answer
        own = scoped.get("/v1/kernels/series", params={"repository": "other/tools", "kernel": TRANSPOSE})
        assert [p["commit"] for p in own.json()["items"]] == ["bbbbbbb"]


def test_retention_deletes_only_samples_older_than_the_limit_in_bounded_batches(
    settings: ServiceSettings, db: Database
) -> None:
    now = datetime.now(UTC)
    ages = {"aaaaaaa": 400, "bbbbbbb": 200, "ccccccc": 181, "ddddddd": 179, "eeeeeee": 0}
    for commit, days in ages.items():
        job_id = finished_job(db, spec(commit=commit), report())
        with db.session() as session:
            session.execute(
                update(KernelSample)
                .where(KernelSample.job_id == job_id)
                .values(created_at=now - timedelta(days=days))
            )
    assert len(samples(db)) == 10  # two kernels per job

    # a pass deletes at most max_batches batches, and tells whether some are left
    assert prune_samples(db, now - timedelta(days=180), batch=2, max_batches=2) == (4, False)
    assert prune_samples(db, now - timedelta(days=180), batch=2, max_batches=2) == (2, True)
    assert {s.commit for s in samples(db)} == {"ddddddd", "eeeeeee"}

    # the dispatcher's sweep prunes with the setting; nothing younger than it goes
    dispatcher = Dispatcher(
        db, make_celery(settings), settings.model_copy(update={"kernel_sample_retention_days": 1})
    )
    assert dispatcher.prune_kernel_samples() == 2
    assert {s.commit for s in samples(db)} == {"eeeeeee"}
    dispatcher.sweep()  # not due again for an hour: nothing more is deleted, the sweep does its work
    assert {s.commit for s in samples(db)} == {"eeeeeee"}


def test_the_retention_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ServiceSettings().kernel_sample_retention_days == 180
    monkeypatch.setenv("INTELLIPERF_KERNEL_SAMPLE_RETENTION_DAYS", "30")
    assert ServiceSettings().kernel_sample_retention_days == 30
    monkeypatch.setenv("INTELLIPERF_KERNEL_SAMPLE_RETENTION_DAYS", "0")
    with pytest.raises(ValidationError, match="kernel_sample_retention_days"):
        ServiceSettings()


def test_the_kernel_samples_migration_upgrades_and_downgrades(database_url: str) -> None:
    config = alembic_config(database_url)
    database = Database(database_url)
    try:
        assert_migration_adds(database_url, database, "0005", "kernel_samples", ["job_id", "kernel"])
        job_id = finished_job(database, spec(), report())
        command.downgrade(config, "0008")  # the launch durations' column goes, the samples stay
        columns = {c["name"] for c in inspect(database.engine).get_columns("kernel_samples")}
        with database.session() as session:
            kept = session.scalar(text("SELECT count(*) FROM kernel_samples"))
        assert "launch_ns" not in columns and kept == 2
        command.upgrade(config, "head")
        assert [s.launch_ns for s in samples(database, job_id)] == [None, None]
        command.downgrade(config, "0005")
        assert "kernel_samples" not in inspect(database.engine).get_table_names()
        with database.session() as session:  # the jobs survive the downgrade
            assert session.scalar(select(func.count()).select_from(Job).where(Job.id == job_id)) == 1
        command.upgrade(config, "head")
        assert samples(database) == []
    finally:
        database.dispose()


def test_the_series_marks_where_the_kernels_time_moved(live: LiveService, db: Database) -> None:
    """Ten commits, two jobs each, 80 µs then 100 µs from the sixth commit on: one change point, at that
    commit, +25% within its interval; mixing devices is refused with the reason; nine commits are too few
    (MIN_COMMITS: the permutation test cannot reach alpha), ten are enough."""
    history_with_a_step(db)
    finished_job(db, spec(commit="f" * 7), report(transpose_ns=90_000.0, device=MI300X))
    query = {"repository": "acme/kernels", "kernel": TRANSPOSE}
    with live.client() as client:
        one_device = client.get("/v1/kernels/series", params={**query, "device": H100}).json()
        mixed = client.get("/v1/kernels/series", params=query).json()
        few = client.get("/v1/kernels/series", params={**query, "device": H100, "limit": 18}).json()
    (change,) = one_device["change_points"]
    assert change["commit"] == f"{5:07x}" and change["index"] == 5
    # the kernel's code hash is the same on every commit: the time moved with the environment, not the code
    assert change["low"] < 0.25 < change["high"] and change["code_changed"] is False
    assert one_device["change_points_note"] is None
    assert mixed["change_points"] == [] and "several devices" in mixed["change_points_note"]
    assert (
        few["change_points"] == []
        and few["change_points_note"] == "9 commit(s): change points need at least 10"
    )


def history_with_a_step(
    db: Database, commits: int = 10, step_at: int = 5, new_code: str | None = None
) -> list[str]:
    """``commits`` commits of the transpose kernel, two jobs each: 80 µs, then 100 µs from ``step_at`` (with
    the code hash ``new_code`` from there, when given: a change to the kernel's code)."""
    rng = np.random.default_rng(5)
    jobs = []
    for number in range(commits):
        level = 80_000.0 if number < step_at else 100_000.0
        code = new_code if new_code is not None and number >= step_at else TRANSPOSE_CODE
        for _ in range(2):
            noisy = float(level * np.exp(rng.normal(0, 0.003)))
            measured = report(transpose_ns=noisy, transpose_code=code)
            jobs.append(finished_job(db, spec(commit=f"{number:07x}"), measured))
    return jobs


def test_a_change_point_where_the_kernels_code_hash_changed_is_a_code_change(
    live: LiveService, db: Database
) -> None:
    history_with_a_step(db, new_code="0123456789abcdef")
    query = {"repository": "acme/kernels", "kernel": TRANSPOSE, "device": H100}
    with live.client() as client:
        (change,) = client.get("/v1/kernels/series", params=query).json()["change_points"]
    assert change["commit"] == f"{5:07x}" and change["code_changed"] is True


def test_the_dashboard_draws_the_series_with_its_change_point(live: LiveService, db: Database) -> None:
    jobs = history_with_a_step(db)
    with db.session() as session:
        _, other = create_token(session, "other-ci", ["other/*"])
    query = {"repository": "acme/kernels", "kernel": TRANSPOSE, "device": H100}
    with httpx.Client(base_url=live.url, timeout=30, follow_redirects=False) as browser:
        assert browser.post("/login", data={"token": ADMIN_TOKEN, "next": "/"}).status_code == 303
        page = browser.get("/kernels/series", params=query)
        assert page.status_code == 200, page.text
        html = page.text
        assert html.count('<circle class="sample"') == 10  # one point per commit, its two jobs averaged
        assert html.count('<line class="change"') == 1
        assert f'<tr data-commit="{5:07x}">' in html and "+25" in html
        assert f'href="/jobs/{jobs[-1]}"' in html
        repositories = browser.get("/kernels").text
        assert '<a href="/kernels?repository=acme%2Fkernels">acme/kernels</a>' in repositories
        listing = browser.get("/kernels", params={"repository": "acme/kernels"}).text
        assert listing.count('href="/kernels/series?repository=acme%2Fkernels&amp;kernel=') == 2
        assert "transpose.cu:59" in listing
        job_page = browser.get(f"/jobs/{jobs[0]}").text
        assert 'class="series" href="/kernels/series?repository=acme%2Fkernels&amp;kernel=' in job_page
        assert 'class="kernels" href="/kernels?repository=acme%2Fkernels"' in job_page
    with httpx.Client(base_url=live.url, timeout=30, follow_redirects=False) as browser:
        assert browser.post("/login", data={"token": other, "next": "/"}).status_code == 303
        assert browser.get("/kernels/series", params=query).status_code == 403
        assert "acme/kernels" not in browser.get("/kernels").text  # not this login's repository


def test_a_jobs_kernels_are_compared_with_the_base_branch(live: LiveService, db: Database) -> None:
    """Ten commits on main, then a pull request's job whose transpose is 25% slower and whose init kernel
    is unchanged: the first moved, the second did not, the comment tables only the first; a kernel main
    never measured is not compared, and says why."""
    history_with_a_step(db, step_at=10)  # main: 80 µs throughout
    slower = report(transpose_ns=100_000.0)
    slower["kernels"][2]["median_ns"] = 40_768.0
    head = spec(commit="f00dfee", ref="feature").model_copy(
        update={"track": TrackSettings(base_branch="main")}
    )
    job_id = finished_job(db, head, slower)
    on_other_device = finished_job(db, spec(commit="f00dfef", ref="feature"), report(device=MI300X))
    with live.client() as client:
        tracking = client.get(f"/v1/jobs/{job_id}/tracking")
        assert tracking.status_code == 200, tracking.text
        body = tracking.json()
        other = client.get(f"/v1/jobs/{on_other_device}/tracking").json()
        stricter = client.get(f"/v1/jobs/{job_id}/tracking", params={"min_effect": 0.5}).json()
        queued = client.post("/v1/jobs", json=spec(commit="0000001").model_dump(mode="json")).json()["id"]
        assert client.get(f"/v1/jobs/{queued}/tracking").status_code == 409
    moves = {m["kernel"]: m for m in body["moves"]}
    transpose = moves["transpose_tiledPKfPfii(…)"]
    assert transpose["moved"] and transpose["low"] < 0.25 < transpose["high"]
    assert transpose["base_commits"] == 10 and transpose["base_ns"] == pytest.approx(80_000, rel=0.01)
    assert [m["moved"] for m in body["moves"] if m is not transpose] == [False]
    assert body["comment"].startswith("1 of 2 kernels moved beyond the noise against the base branch:")
    assert "| `transpose_tiledPKfPfii(…)` | 80" in body["comment"] and "| slower |" in body["comment"]
    assert body["comment"].endswith("/kernels?repository=acme%2Fkernels)")
    assert (body["base_branch"], body["min_effect"], body["not_compared"]) == ("main", 0.03, {})
    assert other["moves"] == [] and set(other["not_compared"].values()) == {f"no samples on main on {MI300X}"}
    assert not any(m["moved"] for m in stricter["moves"])


BOX = SecretBox(SecretStr("kernel-series-test-key"))
SECRETS = {"github_token": "ghp_" + "t" * 36, "llm_key": "sk-" + "k" * 40}


def tracked_history(db: Database, levels: list[float], ref: str = "main") -> list[str]:
    """Tracking jobs on ``ref`` (base branch main), one per commit, each with its secrets, as the Action's
    `mode: track` submits them."""
    rng = np.random.default_rng(11)
    jobs = []
    for number, level in enumerate(levels):
        job_spec = spec(commit=f"{number:07x}", ref=ref).model_copy(update={"track": TrackSettings()})
        with db.session() as session:
            job, _ = submit(session, job_spec, principal=ADMIN, repository="acme/kernels")
            store_secrets(session, job.id, SECRETS, BOX)
        noisy = float(level * np.exp(rng.normal(0, 0.003)))
        with db.session() as session:
            finish(
                session, job.id, status="succeeded", outcome="diagnosed", report=report(transpose_ns=noisy)
            )
        jobs.append(job.id)
    return jobs


def fix_jobs(db: Database) -> list[Job]:
    with db.session() as session:
        jobs = session.scalars(select(Job).order_by(Job.created_at)).all()
        return [job for job in jobs if (job.spec.get("pull_request") or {}).get("note")]


def test_a_slowdown_on_the_base_branch_queues_one_fix_job_naming_the_commit(db: Database) -> None:
    tracking = tracked_history(db, [80_000.0] * 6 + [100_000.0] * 6)
    (fix,) = fix_jobs(db)  # found at commit 9, confirmed at 10 and 11: one job
    fixed = JobSpec.model_validate(fix.spec)
    assert (fix.status, fix.repository, fixed.formula, fixed.track) == (
        "queued",
        "acme/kernels",
        "auto",
        None,
    )
    assert fixed.kernel == f"^{TRANSPOSE}$"
    assert fixed.pull_request.create_pr and fixed.pull_request.base_branch == "main"
    note = fixed.pull_request.note or ""
    assert (
        note.startswith("IntelliPerf's tracking found `transpose_tiledPKfPfii(…)` +2")
        and "from commit 0000006" in note
    )
    assert fixed.repository is not None and fixed.repository.commit in {f"{n:07x}" for n in range(9, 12)}
    with db.session() as session:
        assert load_secrets(session, fix.id, BOX) == SECRETS  # the tracking job's, copied
        assert load_secrets(session, tracking[-1], BOX) == {}  # the tracking job's own are gone
        said = [e.message for e in session.scalars(select(JobEvent).where(JobEvent.job_id.in_(tracking)))]
    assert sum(f"fix job {fix.id} queued" in message for message in said) == 1


def test_a_speedup_or_a_pull_requests_branch_queues_no_fix_job(db: Database) -> None:
    tracked_history(db, [100_000.0] * 6 + [80_000.0] * 6)
    tracked_history(db, [80_000.0] * 6 + [100_000.0] * 6, ref="feature")  # compared, never answered
    assert fix_jobs(db) == []


def test_a_failure_answering_regressions_keeps_the_jobs_end(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("service.regressions.open_fix_jobs", broken)
    (job_id,) = tracked_history(db, [80_000.0])
    with db.session() as session:
        job = session.get(Job, job_id)
        assert job is not None and job.status == "succeeded"
        assert load_secrets(session, job_id, BOX) == {}
    assert [s.kernel for s in samples(db, job_id)] == [TRANSPOSE, INIT]


def test_a_pull_requests_samples_are_not_part_of_the_base_branchs_history(
    live: LiveService, db: Database
) -> None:
    history_with_a_step(db)
    finished_job(db, spec(commit="f00dfee", ref="feature"), report(transpose_ns=80_000.0))
    query = {"repository": "acme/kernels", "kernel": TRANSPOSE, "device": H100}
    with live.client() as client:
        mixed = client.get("/v1/kernels/series", params=query).json()
        main = client.get("/v1/kernels/series", params={**query, "ref": "main"}).json()
    assert mixed["total"] == 21 and mixed["change_points"] == []
    assert (
        mixed["change_points_note"]
        == "samples from several branches: ask for one ref to see its change points"
    )
    assert main["total"] == 20 and [c["commit"] for c in main["change_points"]] == [f"{5:07x}"]


def test_a_comparison_rests_on_the_newest_base_samples_only(db: Database) -> None:
    """BASE_SAMPLES at its edge: of 201 jobs on main, the oldest is left out of the level."""
    from service.kernel_samples import BASE_SAMPLES, compare_job_to_base

    for number in range(BASE_SAMPLES + 1):
        finished_job(db, spec(commit=f"{number:07x}"), report(transpose_ns=80_000.0 + number % 3))
    head = finished_job(db, spec(commit="f00dfee", ref="feature"), report(transpose_ns=80_000.0))
    with db.session() as session:
        compared = compare_job_to_base(session, head, "main", 0.03)
    transpose = next(m for m in compared.moves if m.kernel.startswith("transpose"))
    assert BASE_SAMPLES == 200 and transpose.base_commits == BASE_SAMPLES and not transpose.moved


def test_a_series_reads_the_launch_durations_only_when_asked(db: Database) -> None:
    """Without ``with_launches`` the query leaves ``launch_ns`` (up to 256 numbers a sample) in the database:
    reading it raises instead of loading it sample by sample; with it, each sample has its durations."""
    finished_job(db, spec(), report(100.0))
    finished_job(db, spec(), report(90.0))
    statements: list[str] = []

    def record(*args: Any) -> None:
        statements.append(args[2])

    sqlalchemy_event.listen(db.engine, "before_cursor_execute", record)
    try:
        with db.session() as session:
            page = kernel_series(session, "acme/kernels", TRANSPOSE, None, limit=10)
            assert [sample.median_ns for sample in page.samples] == [100.0, 90.0]
            with pytest.raises(InvalidRequestError, match="launch_ns"):
                _ = page.samples[0].launch_ns
    finally:
        sqlalchemy_event.remove(db.engine, "before_cursor_execute", record)
    assert statements and not any("launch_ns" in statement for statement in statements)
    with db.session() as session:
        page = kernel_series(session, "acme/kernels", TRANSPOSE, None, limit=10, with_launches=True)
        expected = [transpose_launches(100.0), transpose_launches(90.0)]
        assert [sample.launch_ns for sample in page.samples] == expected

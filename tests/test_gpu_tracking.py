"""Continuous mode on the GPU: a short history of transpose_bank measured by the real engine (its timing
pass on the GPU, one counter store for the history), each report recorded as the service records every
finished tracking job. The commits that swap the fixed kernel (37 µs on an H100) for the bank-conflicted
one (78 µs) are found as a regression at the right commit and answered with one fix job naming it; a pull
request's run of the fixed kernel against that base branch is reported faster beyond the noise. Only the
first commit of each kernel's code pays the counter pass: the others reuse its counters by code hash and
are diagnosed alike."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from benchmarks.tracking_history import FAST, HISTORY, KERNEL, built_project, measured, row_of, run_history
from intelliperf.action._inputs import GithubContext
from intelliperf.action._track import post_to_pull_request, tracked
from intelliperf.contract import Application, JobSpec, RepositoryRef, TrackSettings
from service.auth import ADMIN
from service.db.migrate import upgrade
from service.db.models import Job, KernelSample
from service.db.session import Database
from service.job_end import finish
from service.jobs import submit
from service.kernel_samples import compare_job_to_base, kernel_series, series_change_points
from service.settings import ServiceSettings
from tests.service.conftest import ADMIN as ADMIN_TOKEN
from tests.service.conftest import WORKER_TOKEN, serve
from tests.support.fake_github import FakeGitHub

pytestmark = pytest.mark.gpu


def tracking_job(db: Database, commit: str, ref: str, report: dict) -> str:
    spec = JobSpec(
        repository=RepositoryRef(url="https://github.com/acme/kernels.git", ref=ref, commit=commit),
        applications=[Application(command=["./bin/transpose"])],
        formula="diagnoseOnly",
        track=TrackSettings(base_branch="main"),
    )
    with db.session() as session:
        job, _ = submit(session, spec, principal=ADMIN, repository="acme/kernels")
    with db.session() as session:
        finish(session, job.id, status="succeeded", outcome="diagnosed", report=report)
    return job.id


def test_a_regression_in_gpu_timings_is_found_at_its_commit_and_answered(tmp_path: Path) -> None:
    project = built_project(tmp_path)
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    upgrade(url)
    db = Database(url)
    try:
        reports = run_history(project, tmp_path)
        for number, report in enumerate(reports):
            tracking_job(db, f"{number:07x}", "main", report)
        pr_report = measured(project, FAST, tmp_path / "report-pr.json", tmp_path / "counters")
        pull = tracking_job(db, "f00dfee", "feature", pr_report)
        with db.session() as session:
            series = kernel_series(session, "acme/kernels", KERNEL, None, limit=100, ref="main")
            changes, note = series_change_points(series.samples)
            compared = compare_job_to_base(session, pull, "main", 0.03)
            kept = session.scalars(select(KernelSample).where(KernelSample.kernel == KERNEL)).all()
            jobs = session.scalars(select(Job)).all()
            fixes = [JobSpec.model_validate(j.spec) for j in jobs if j.spec["pull_request"].get("note")]
    finally:
        db.dispose()
    rows = [row_of(n, app, report) for n, (app, report) in enumerate(zip(HISTORY, reports, strict=True))]
    medians = [row["median_ns"] for row in rows]
    assert max(medians[:6]) < min(medians[6:]), medians  # the bank conflicts cost time on this GPU
    assert note is None and [c.commit for c in changes] == [f"{6:07x}"], (changes, medians)
    assert changes[0].change > 0.3 and changes[0].low > 0.2 and changes[0].code_changed is True
    (fix,) = fixes
    assert fix.kernel == f"^{KERNEL}$" and fix.formula == "auto" and fix.pull_request.create_pr
    assert fix.pull_request.note is not None and f"from commit {6:07x} on `main`" in fix.pull_request.note
    # each sample keeps the timing pass's launch durations, whose median is the sample's
    assert len(kept) == len(reports) + 1
    for sample in kept:
        assert sample.launch_ns is not None and len(sample.launch_ns) == min(sample.launches, 256)
        if sample.launches <= 256:  # every launch kept
            assert statistics.median(sample.launch_ns) == sample.median_ns
    (move,) = [m for m in compared.moves if m.kernel.startswith("transpose_tiled")]
    assert move.moved and move.change < -0.3, move

    # the pull request's comment and check run, as the Action posts them from the service's answer
    comments, checks = pull_request_comment(url, tmp_path / "service", pull)
    (comment,) = comments
    assert "kernel times against main" in comment["body"] and "transpose_tiled" in comment["body"]
    assert f"| {move.change:+.1%} |" in comment["body"] and "| faster |" in comment["body"]
    assert "/kernels?repository=acme%2Fkernels" in comment["body"]  # the link to the kernel's chart
    assert [(c["head_sha"], c["conclusion"]) for c in checks] == [(PR_SHA, "success")]  # faster, none slower

    # reuse by code hash: one code hash per kernel version, the counter pass paid once for each
    assert len({row["code_hash"] for row in rows[:6]}) == len({row["code_hash"] for row in rows[6:]}) == 1
    assert rows[0]["code_hash"] != rows[6]["code_hash"] and rows[0]["code_hash"] is not None
    assert [row["counters"] for row in rows] == ["measured", *["reused"] * 5, "measured", *["reused"] * 5]
    for first, later in ((rows[0], rows[1:6]), (rows[6], rows[7:])):
        assert first["counters_s"] > 0 and first["counters_saved_s"] is None
        for row in later:
            assert row["counters_s"] is None and row["counters_saved_s"] == pytest.approx(
                first["counters_s"], abs=0.01
            )
            assert row["bottlenecks"] == first["bottlenecks"]
    assert "bankConflict" in rows[6]["bottlenecks"] and "bankConflict" not in rows[0]["bottlenecks"]
    slow = [r["diagnoses"] for r in reports[6:]]
    assert all(d == slow[0] for d in slow)  # the reused diagnosis names the same lines
    assert pr_report["reused_counters"] and pr_report["passes"]["counters_s"] is None


PR_SHA = "f00dfee" + "0" * 33


def pull_request_comment(url: str, data_dir: Path, pull_job: str) -> tuple[list[dict[str, Any]], list[dict]]:
    """The comment and check run the Action's `mode: track` posts on the pull request of ``pull_job`` (the
    service's GET /v1/jobs/{id}/tracking, through a real service on the database at ``url``, posted to a
    GitHub REST server on 127.0.0.1)."""
    settings = ServiceSettings(
        data_dir=data_dir,
        database_url=url,
        admin_token=ADMIN_TOKEN,  # type: ignore[arg-type]
        worker_token=WORKER_TOKEN,  # type: ignore[arg-type]
    )
    with serve(settings, dispatch=False) as live, live.client() as client, FakeGitHub() as github:
        answer = client.get(f"/v1/jobs/{pull_job}/tracking")
        assert answer.status_code == 200, answer.text
        repo = github.add_repository("acme/kernels", {"README.md": "kernels\n"})
        repo.commit_files({"transpose.cu": "// the pull request\n"}, "faster", branch="feature")
        number = github.open_pull("acme/kernels", "feature", title="faster")
        context = GithubContext(
            workspace=".", repository="acme/kernels", sha=PR_SHA, job="track", api_url=github.api_url
        )
        post_to_pull_request(context, github.token, number, tracked([answer.json()], ["app"]))
        return list(repo.comments), list(repo.check_runs)

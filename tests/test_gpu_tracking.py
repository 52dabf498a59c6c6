"""Continuous mode on the GPU: a short history of transpose_bank measured by the real engine (its timing
pass on the GPU), each report recorded as the service records every finished tracking job. The commits
that swap the fixed kernel (37 µs on an H100) for the bank-conflicted one (78 µs) are found as a
regression at the right commit and answered with one fix job naming it; a pull request's run of the fixed
kernel against that base branch is reported faster beyond the noise."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from intelliperf.contract import Application, JobSpec, RepositoryRef, TrackSettings
from service.auth import ADMIN
from service.db.migrate import upgrade
from service.db.models import Job
from service.db.session import Database
from service.job_end import finish
from service.jobs import submit
from service.kernel_samples import compare_job_to_base, kernel_series, series_change_points
from tests.support.diagnose_run import EXAMPLES, intelliperf

pytestmark = pytest.mark.gpu

FAST, SLOW = "./bin/transpose_fixed", "./bin/transpose"
HISTORY = [FAST] * 6 + [SLOW] * 6  # the regression lands at commit 6 (10 commits at least: MIN_COMMITS)
KERNEL = "_Z15transpose_tiledPKfPfii"


def measured(project: Path, app: str, out: Path) -> dict:
    done = intelliperf(
        "run", "-f", "diagnoseOnly", "--top_n", "1", "-p", str(project), "-o", str(out), "--", app
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())


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
    project = tmp_path / "transpose_bank"
    shutil.copytree(EXAMPLES / "transpose_bank", project, ignore=shutil.ignore_patterns("bin"))
    built = subprocess.run(["make"], cwd=project, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    upgrade(url)
    db = Database(url)
    try:
        medians = []
        for number, app in enumerate(HISTORY):
            report = measured(project, app, tmp_path / f"report-{number}.json")
            medians.append(next(k["median_ns"] for k in report["kernels"] if k["name"] == KERNEL))
            tracking_job(db, f"{number:07x}", "main", report)
        pull = tracking_job(db, "f00dfee", "feature", measured(project, FAST, tmp_path / "report-pr.json"))
        with db.session() as session:
            series = kernel_series(session, "acme/kernels", KERNEL, None, limit=100, ref="main")
            changes, note = series_change_points(series.samples)
            compared = compare_job_to_base(session, pull, "main", 0.03)
            jobs = session.scalars(select(Job)).all()
            fixes = [JobSpec.model_validate(j.spec) for j in jobs if j.spec["pull_request"].get("note")]
    finally:
        db.dispose()
    assert max(medians[:6]) < min(medians[6:]), medians  # the bank conflicts cost time on this GPU
    assert note is None and [c.commit for c in changes] == [f"{6:07x}"], (changes, medians)
    assert changes[0].change > 0.3 and changes[0].low > 0.2
    (fix,) = fixes
    assert fix.kernel == f"^{KERNEL}$" and fix.formula == "auto" and fix.pull_request.create_pr
    assert fix.pull_request.note is not None and f"from commit {6:07x} on `main`" in fix.pull_request.note
    (move,) = [m for m in compared.moves if m.kernel.startswith("transpose_tiled")]
    assert move.moved and move.change < -0.3, move

"""One job on this worker: claim it, fetch its project, run the engine, record the outcome.

Whatever happens (a bad archive, a crashing engine, a time limit, a cancellation, a bug here), the job
ends in a finished state with its reason: it is never left 'running' by a worker that is still alive.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from intelliperf.contract import JobSpec, Report
from service.archive import ArchiveError
from service.db.models import Job, JobArchive
from service.db.session import Database
from service.jobs import add_event, claim, finish
from service.secrets import SecretBox, SecretError, load_secrets
from worker.executor import EngineEvent, ExecutionResult, Executor
from worker.heartbeat import Heartbeat
from worker.pull_request import DEFAULT_API_URL, GitHubTarget, PullRequestError, open_pull_request
from worker.source import SourceError, checkout, from_archive

__all__ = ["OUTCOME_BY_EXIT_CODE", "JobRunner", "classify", "github_token_from_env"]

log = logging.getLogger(__name__)
T = TypeVar("T")

OUTCOME_BY_EXIT_CODE = {
    2: "bad_spec",
    3: "no_gpu",
    4: "tool_missing",
    5: "build_failed",
    6: "app_failed",
    7: "kernel_not_found",
    8: "no_line_info",
    9: "profiler_failed",
    10: "native_build_failed",
    11: "validation_error",
    12: "llm_error",
}
CANCEL_CHECK_S = 1.0
DATABASE_DOWN = (OperationalError, InterfaceError)
"""What SQLAlchemy raises while the database is unreachable, restarting or refusing connections."""


def classify(result: ExecutionResult) -> tuple[str, str, str | None]:
    """(status, outcome, error) of a finished execution."""
    if result.cancelled:
        return "cancelled", "cancelled", None
    if result.timed_out:
        return "failed", "timeout", "the job ran past its time limit and was stopped"
    if result.exit_code == 0 and result.report is not None:
        optimization = result.report.get("optimization")
        if isinstance(optimization, dict):
            return "succeeded", str(optimization.get("status")), None
        return "succeeded", "diagnosed", None
    code = result.exit_code
    outcome = OUTCOME_BY_EXIT_CODE.get(code or 0, "engine_crashed")
    message = result.error.message if result.error else f"the engine exited with {code}:\n{result.log_tail}"
    return "failed", outcome, message


def _speedup(report: dict[str, object] | None) -> float | None:
    best = (report or {}).get("best")
    if isinstance(best, dict) and isinstance(best.get("speedup"), dict):
        median = best["speedup"].get("median")
        return float(median) if isinstance(median, int | float) else None
    return None


def github_token_from_env(_spec: JobSpec) -> str | None:
    """The worker's token for pull requests: INTELLIPERF_GITHUB_TOKEN."""
    return os.environ.get("INTELLIPERF_GITHUB_TOKEN") or None


class JobRunner:
    def __init__(
        self,
        db: Database,
        executor: Executor,
        worker_name: str,
        *,
        heartbeat: Heartbeat | None = None,
        work_dir: Path | None = None,
        time_limit_s: float = 6 * 3600,
        secret_box: SecretBox | None = None,
        github_token: Callable[[JobSpec], str | None] = github_token_from_env,
        github_api_url: str | None = None,
        github_retries: int = 3,
        github_throttle: bool = True,
        write_retry_s: float = 3600.0,
    ) -> None:
        self.db = db
        self.executor = executor
        self.worker_name = worker_name
        self.heartbeat = heartbeat
        self.work_dir = work_dir
        self.time_limit_s = time_limit_s
        self.secret_box = secret_box
        """Decrypts the secrets sent with a job (service.secrets); None: such jobs fail with that reason."""
        self.github_token = github_token
        self.github_api_url = github_api_url
        """None: INTELLIPERF_GITHUB_API_URL, else https://api.github.com (GitHub Enterprise: .../api/v3)."""
        self.github_retries = github_retries
        self.github_throttle = github_throttle
        """PyGithub's pacing between requests; tests against a local server turn it and retries off."""
        self.write_retry_s = write_retry_s
        """How long an event or a result that the database refuses is retried (with backoff) before the
        worker gives up on it; the reaper then takes the job back."""

    def _transaction(self, what: str, work: Callable[[Session], T]) -> T:
        """Run ``work`` in its own transaction, again with backoff (0.5 s doubling to 10 s) while the
        database is down, so an outage delays a job's claim, its secrets and archive, its events and its
        result instead of failing or losing them."""
        deadline, wait = time.monotonic() + self.write_retry_s, 0.5
        while True:
            try:
                with self.db.session() as session:
                    return work(session)
            except DATABASE_DOWN as exc:
                if time.monotonic() + wait > deadline:
                    raise
                log.warning(
                    "%s: the database is unavailable (%s); again in %.1f s",
                    what,
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    wait,
                )
                time.sleep(wait)
                wait = min(wait * 2, 10.0)

    def _claim(self, job_id: str) -> Job | None:
        run_id = self.heartbeat.run_id if self.heartbeat else None

        def take(session: Session) -> Job | None:
            job = claim(session, job_id, self.worker_name, run_id)
            if job is None and run_id is not None:
                # a try whose commit landed although its answer was lost to the outage: ours all the same
                mine = session.get(Job, job_id)
                if mine is not None and mine.status == "running" and mine.worker_run == run_id:
                    return mine
            return job

        return self._transaction(f"claiming job {job_id}", take)

    def run(self, job_id: str) -> str:
        """Returns the job's final status, or 'skipped' when it was not this run's to do."""
        job = self._claim(job_id)
        if job is None:
            log.info("job %s is not queued (finished, cancelled or taken): skipped", job_id)
            return "skipped"
        if self.heartbeat:
            self.heartbeat.set_job(job_id)
        try:
            return self._run_claimed(job)
        except Exception as exc:
            log.exception("job %s failed inside the worker", job_id)
            trace, error = traceback.format_exc(limit=5), f"{type(exc).__name__}: {exc}"

            def failed(session: Session) -> None:
                add_event(session, job_id, "log", trace)
                finish(session, job_id, status="failed", outcome="worker_error", error=error)

            self._transaction(f"writing job {job_id}'s failure", failed)
            return "failed"
        finally:
            if self.heartbeat:
                self.heartbeat.set_job(None)

    def _run_claimed(self, job: Job) -> str:
        spec = JobSpec.model_validate(job.spec)
        try:
            secrets = self._transaction(
                f"reading the secrets of job {job.id}",
                lambda session: load_secrets(session, job.id, self.secret_box),
            )
        except SecretError as exc:
            self._finish(job.id, status="failed", outcome="worker_error", error=str(exc))
            return "failed"
        # the job's own GitHub token (sent with it) wins over the worker's
        github_token = secrets.get("github_token") or self.github_token(spec)
        with tempfile.TemporaryDirectory(
            prefix=f"intelliperf-job-{job.id[:8]}-", dir=self.work_dir
        ) as scratch:
            self._event(job.id, "stage", "fetching the project", "source")
            try:
                root = self._fetch(job, spec, Path(scratch) / "src", github_token)
            except (SourceError, ArchiveError, OSError) as exc:
                self._finish(job.id, status="failed", outcome="source_error", error=str(exc))
                return "failed"
            project = root / spec.project_directory
            if not project.is_dir():
                error = f"project_directory {spec.project_directory!r} is not a folder of the project"
                self._finish(job.id, status="failed", outcome="bad_spec", error=error)
                return "failed"
            result = self.executor.run(
                spec,
                project,
                Path(scratch) / "out",
                on_events=lambda events: self._store(job.id, events),
                should_cancel=self._cancel_check(job.id),
                time_limit_s=min(spec.timeouts.job_s, self.time_limit_s),
                env={spec.llm.key_env: secrets["llm_key"]} if "llm_key" in secrets else None,
            )
        status, outcome, error = classify(result)
        report, pr_url = result.report, None
        if status == "succeeded" and report is not None:
            report, pr_url = self._pull_request(job.id, spec, report, github_token)
        self._finish(
            job.id,
            status=status,
            outcome=outcome,
            error=error,
            report=report,
            diff=(report or {}).get("diff"),
            summary=result.summary,
            speedup=_speedup(report),
            pr_url=pr_url,
        )
        return status

    def _finish(self, job_id: str, **result: object) -> None:
        self._transaction(f"writing job {job_id}'s result", lambda session: finish(session, job_id, **result))  # type: ignore[arg-type]

    def _pull_request(
        self, job_id: str, spec: JobSpec, report: dict[str, object], token: str | None
    ) -> tuple[dict[str, object], str | None]:
        """Open or update the job's pull request when it asks for one and has a rewrite to propose.
        A failure here never loses the result: the report gains a warning and the job an event."""
        if not (
            spec.pull_request.create_pr and spec.repository and report.get("best") and report.get("diff")
        ):
            return report, None
        self._event(job_id, "stage", "opening the pull request", "pull_request")
        try:
            if not token:
                raise PullRequestError("no GitHub token: set INTELLIPERF_GITHUB_TOKEN for the worker")
            api_url = self.github_api_url or os.environ.get("INTELLIPERF_GITHUB_API_URL") or DEFAULT_API_URL
            target = GitHubTarget(token, api_url, retries=self.github_retries, throttle=self.github_throttle)
            opened = open_pull_request(Report.model_validate(report), spec, job_id, target)
        except Exception as exc:
            reason = str(exc) if isinstance(exc, PullRequestError) else f"{type(exc).__name__}: {exc}"
            if token:
                reason = reason.replace(token, "***")
            log.warning("job %s: pull request failed: %s", job_id, reason)
            self._event(job_id, "log", f"pull request failed: {reason}", "pull_request")
            warnings = [*(report.get("warnings") or []), f"pull request failed: {reason}"]  # type: ignore[misc]
            return {**report, "warnings": warnings}, None
        self._event(job_id, "log", f"pull request {opened.verb}: {opened.url}", "pull_request")
        return report, opened.url

    def _fetch(self, job: Job, spec: JobSpec, destination: Path, token: str | None) -> Path:
        if job.source == "archive":

            def read(session: Session) -> bytes:
                archive = session.get(JobArchive, job.id)
                if archive is None:
                    raise SourceError(f"job {job.id} has no uploaded archive")
                return archive.data

            return from_archive(self._transaction(f"reading the archive of job {job.id}", read), destination)
        if spec.repository is None:
            raise SourceError("the job names no repository to clone")
        return checkout(spec.repository, destination, token=token)

    def _event(self, job_id: str, kind: str, message: str, stage: str | None = None) -> None:
        self._transaction(
            f"writing an event of job {job_id}",
            lambda session: add_event(session, job_id, kind, message, stage),
        )

    def _store(self, job_id: str, events: list[EngineEvent]) -> None:
        def store(session: Session) -> None:
            for event in events:
                kind = "log" if event.kind == "error" else event.kind
                add_event(session, job_id, kind, event.message, event.stage)

        self._transaction(f"writing {len(events)} event(s) of job {job_id}", store)

    def _cancel_check(self, job_id: str) -> Callable[[], bool]:
        last = 0.0

        def requested() -> bool:
            nonlocal last
            if time.monotonic() - last < CANCEL_CHECK_S:
                return False
            last = time.monotonic()
            try:
                with self.db.session() as session:
                    job = session.get(Job, job_id)
                    return job is None or job.cancel_requested
            except DATABASE_DOWN:
                return False  # asked again in a second; a cancellation waits for the database

        return requested

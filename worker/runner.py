"""One job on this worker: claim it, fetch its project, run the engine, record the outcome.

Whatever happens (a bad archive, a crashing engine, a time limit, a cancellation, a bug here), the job
ends in a finished state with its reason: it is never left 'running' by a worker that is still alive.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from intelliperf.contract import JobSpec, Report
from intelliperf.contract.worker import ClaimedJob, JobResult
from intelliperf.errors import OUTCOME_BY_EXIT_CODE
from intelliperf.project_archive import ArchiveError
from intelliperf.repository_hosts import repository_url_refusal
from worker import counter_entries
from worker.executor import REPRODUCER, EngineEvent, ExecutionResult, Executor
from worker.heartbeat import Heartbeat
from worker.job_events import EventSender
from worker.pull_request import DEFAULT_API_URL, GitHubTarget, PullRequestError, open_pull_request
from worker.reproducer_archive import pack_reproducer, reproducer_paths
from worker.scratch import job_scratch
from worker.service_client import NotDelivered, ServiceClient, ServiceError
from worker.source import SourceError, checkout, from_archive

__all__ = ["JobRunner", "classify", "github_token_from_env"]

log = logging.getLogger(__name__)

CANCEL_CHECK_S = 1.0


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


def _kind(kind: str) -> Literal["stage", "log"]:
    """An event's kind as stored: the engine's errors are log lines (the result carries the error)."""
    return "stage" if kind == "stage" else "log"


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
        service: ServiceClient,
        executor: Executor,
        worker_name: str,
        *,
        heartbeat: Heartbeat,
        work_dir: Path | None = None,
        time_limit_s: float = 6 * 3600,
        github_token: Callable[[JobSpec], str | None] = github_token_from_env,
        github_api_url: str | None = None,
        github_retries: int = 3,
        github_throttle: bool = True,
        github_hosts: Sequence[str] = ("github.com",),
        reuse_counters: bool = False,
    ) -> None:
        self.service = service
        self.executor = executor
        self.worker_name = worker_name
        self.heartbeat = heartbeat
        self.work_dir = work_dir
        self.time_limit_s = time_limit_s
        self.github_token = github_token
        self.github_api_url = github_api_url
        """None: INTELLIPERF_GITHUB_API_URL, else https://api.github.com (GitHub Enterprise: .../api/v3)."""
        self.github_retries = github_retries
        self.github_throttle = github_throttle
        """PyGithub's pacing between requests; tests against a local server turn it and retries off."""
        self.github_hosts = list(github_hosts)
        """The hosts a job's repository may be cloned from (INTELLIPERF_GITHUB_HOSTS)."""
        self.reuse_counters = reuse_counters
        """Whether a job of a repository gets its entries from the service and, where it publishes, sends
        its new ones back (worker.counter_entries)."""
        self._events: EventSender | None = None

    def run(self, job_id: str, delivery: str) -> str:
        """Returns the job's final status, or 'skipped' when it was not this run's to do. ``delivery``: the
        secret of the broker message that brought the job, which its claim names."""
        try:
            job = self.service.claim(job_id, self.worker_name, self.heartbeat.run_id, delivery)
        except NotDelivered as exc:
            log.warning(
                "job %s: the service does not know this message's delivery: skipped (%s)", job_id, exc
            )
            return "skipped"
        if job is None:
            log.info("job %s is not queued (finished, cancelled or taken): skipped", job_id)
            return "skipped"
        self.heartbeat.set_job(job_id)
        self._events = EventSender(self.service, job_id, self.heartbeat.run_id)
        try:
            return self._run_claimed(job)
        except Exception as exc:
            log.exception("job %s failed inside the worker", job_id)
            trace, error = traceback.format_exc(limit=5), f"{type(exc).__name__}: {exc}"
            self._event("log", trace)
            self._finish(job_id, status="failed", outcome="worker_error", error=error)
            return "failed"
        finally:
            self.heartbeat.set_job(None)

    def _run_claimed(self, job: ClaimedJob) -> str:
        spec, secrets = job.spec, job.secrets
        if job.secrets_error is not None:
            self._finish(job.id, status="failed", outcome="worker_error", error=job.secrets_error)
            return "failed"
        # the job's own GitHub token (sent with it) wins over the worker's
        github_token = secrets.get("github_token") or self.github_token(spec)
        with job_scratch(job.id, self.work_dir) as scratch:
            self._event("stage", "fetching the project", "source")
            try:
                root = self._fetch(job, spec, scratch / "src", github_token)
            except (SourceError, ArchiveError, OSError) as exc:
                self._finish(job.id, status="failed", outcome="source_error", error=str(exc))
                return "failed"
            project = root / spec.project_directory
            if not project.is_dir():
                error = f"project_directory {spec.project_directory!r} is not a folder of the project"
                self._finish(job.id, status="failed", outcome="bad_spec", error=error)
                return "failed"
            out = scratch / "out"
            counters = self._counters(job, scratch / counter_entries.FOLDER)
            result = self.executor.run(
                spec,
                project,
                out,
                on_events=self._store,
                should_cancel=self._cancel_check(job.id),
                time_limit_s=min(spec.timeouts.job_s, self.time_limit_s),
                env={spec.llm.key_env: secrets["llm_key"]} if "llm_key" in secrets else None,
                scratch=scratch,
                counters=counters,
            )
            status, outcome, error = classify(result)
            if status == "succeeded" and counters is not None and spec.publishes_counters(job.source):
                self._publish(job.id, out / counter_entries.OUTPUT)
            report, pr_url = result.report, None
            if status == "succeeded" and report is not None:  # while the scratch (its reproducer) is there
                download, report = self._store_reproducer(job.id, out / REPRODUCER, scratch, report)
                report, pr_url = self._pull_request(
                    job.id, spec, report, github_token, out / REPRODUCER, download
                )
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

    def _counters(self, job: ClaimedJob, folder: Path) -> Path | None:
        """``folder`` with the entries of the job's repository, for the job to read; None without reuse or
        a repository (the engine then neither reads nor saves counters). A download that fails leaves the
        job to run without reuse, with a note."""
        if not self.reuse_counters or not job.repository:
            return None
        try:
            count = counter_entries.download(self.service, job.id, self.heartbeat.run_id, folder)
        except (ServiceError, OSError) as exc:
            log.warning("job %s: downloading its repository's counters failed: %s", job.id, exc)
            self._event("log", f"counters of earlier jobs not downloaded, none reused: {exc}")
            return folder
        if count:
            self._event("log", f"counter entries of {job.repository} to reuse: {count}")
        return folder

    def _publish(self, job_id: str, written: Path) -> None:
        """Upload the job's new counters; a failure costs later jobs their reuse, never this job."""
        try:
            published = counter_entries.publish(self.service, job_id, self.heartbeat.run_id, written)
        except (ServiceError, OSError) as exc:
            log.warning("job %s: uploading its counters failed: %s", job_id, exc)
            self._event("log", f"counters not kept, uploading them failed: {exc}")
            return
        for refused in published.refused:
            self._event("log", f"counters not kept: {refused}")
        if published.kept:
            self._event("log", f"counters of {published.kept} kernel(s) kept for later pushes to reuse")

    def _finish(self, job_id: str, **result: object) -> None:
        self.service.result(job_id, JobResult(run_id=self.heartbeat.run_id, **result))  # type: ignore[arg-type]

    def _store_reproducer(
        self, job_id: str, folder: Path, scratch: Path, report: dict[str, object]
    ) -> tuple[str | None, dict[str, object]]:
        """The job's reproducer stored with the service (its download address), or None when there is none
        or storing it failed: a failure never loses the result, the report gains a warning."""
        paths = reproducer_paths(folder)
        if paths is None:
            return None, report
        self._event("stage", "storing the reproducer", "reproducer")
        try:
            tarball = pack_reproducer(paths, scratch / "reproducer.tar.gz")
            stored = self.service.reproducer(job_id, self.heartbeat.run_id, tarball)
        except (ServiceError, OSError) as exc:
            log.warning("job %s: storing the reproducer failed: %s", job_id, exc)
            self._event("log", f"storing the reproducer failed: {exc}", "reproducer")
            warnings = [*(report.get("warnings") or []), f"storing the reproducer failed: {exc}"]  # type: ignore[misc]
            return None, {**report, "warnings": warnings}
        self._event("log", f"reproducer stored ({stored.bytes / 2**20:.1f} MiB): {stored.url}", "reproducer")
        return stored.url, report

    def _pull_request(
        self,
        job_id: str,
        spec: JobSpec,
        report: dict[str, object],
        token: str | None,
        reproducer: Path,
        download: str | None,
    ) -> tuple[dict[str, object], str | None]:
        """Open or update the job's pull request when it asks for one and has a rewrite to propose.
        A failure here never loses the result: the report gains a warning and the job an event."""
        if not (
            spec.pull_request.create_pr and spec.repository and report.get("best") and report.get("diff")
        ):
            return report, None
        self._event("stage", "opening the pull request", "pull_request")
        try:
            if not token:
                raise PullRequestError("no GitHub token: set INTELLIPERF_GITHUB_TOKEN for the worker")
            api_url = self.github_api_url or os.environ.get("INTELLIPERF_GITHUB_API_URL") or DEFAULT_API_URL
            target = GitHubTarget(token, api_url, retries=self.github_retries, throttle=self.github_throttle)
            opened = open_pull_request(
                Report.model_validate(report), spec, job_id, target, reproducer, download_url=download
            )
        except Exception as exc:
            reason = str(exc) if isinstance(exc, PullRequestError) else f"{type(exc).__name__}: {exc}"
            if token:
                reason = reason.replace(token, "***")
            log.warning("job %s: pull request failed: %s", job_id, reason)
            self._event("log", f"pull request failed: {reason}", "pull_request")
            warnings = [*(report.get("warnings") or []), f"pull request failed: {reason}"]  # type: ignore[misc]
            return {**report, "warnings": warnings}, None
        self._event("log", f"pull request {opened.verb}: {opened.url}", "pull_request")
        return report, opened.url

    def _fetch(self, job: ClaimedJob, spec: JobSpec, destination: Path, token: str | None) -> Path:
        if job.source == "archive":
            return from_archive(self.service.archive(job.id, self.heartbeat.run_id), destination)
        if spec.repository is None:
            raise SourceError("the job names no repository to clone")
        # the service checked this at submit; a job queued before that rule, or a service configured with
        # other hosts, must still not get git (and the token) pointed at a server of its choosing
        refusal = repository_url_refusal(spec.repository.url, self.github_hosts)
        if refusal is not None:
            raise SourceError(f"the job's repository is not cloned: {refusal}")
        return checkout(spec.repository, destination, token=token)

    def _event(self, kind: str, message: str, stage: str | None = None) -> None:
        self._store([EngineEvent(kind, message, stage)])

    def _store(self, events: list[EngineEvent]) -> None:
        """The running job's events (``run`` made its sender)."""
        assert self._events is not None
        self._events.send([(_kind(e.kind), e.message, e.stage) for e in events])

    def _cancel_check(self, job_id: str) -> Callable[[], bool]:
        last = 0.0

        def requested() -> bool:
            nonlocal last
            if time.monotonic() - last < CANCEL_CHECK_S:
                return False
            last = time.monotonic()
            return self.service.cancel_requested(job_id, self.heartbeat.run_id)

        return requested

"""Getting queued jobs to the broker, and back to it when it lost them.

The database is the record: a job is committed as ``queued`` before anything is published, and the
dispatcher sends every queued job that was never sent, or was sent long ago (``redispatch_after_s``).
A Redis that restarted without persistence has lost its queues: its ``run_id`` changes, and then every
queued job is sent again. Running jobs whose worker stopped heartbeating are re-queued once, then
failed with that reason (the reaper). Duplicated messages are harmless: a worker's claim is a
conditional UPDATE that only one run wins.

A submission wakes the dispatcher, which then only sends what is due: the jobs this process committed
since its last pass, looked up by primary key (a query for every due job scans the queued ones, so it
waits for the sweep), in one transaction, over one broker connection in one Redis pipeline. Reaping,
the broker's restart check and the search for every due job run every ``dispatch_sweep_s``, however
busy the API is. Several API processes each run a dispatcher; on
PostgreSQL the due rows are locked (SKIP LOCKED), so each queued job is sent by one of them.

Each message carries a new delivery secret (service.deliveries), whose hash is committed with the job's
``dispatched_at`` before the message is sent, so a worker that receives it at once finds it; a pass whose
messages did not reach the broker takes its ``dispatched_at`` back, and the next pass sends them again.

The reaper judges workers by the time the service could hear them: after this process starts, or after its
database was unreachable, a worker's heartbeat counts as fresh for ``worker_stale_s`` (the workers were
beating into an outage, not dead), so an API or database outage re-runs no job.

The sweep also deletes kernel samples older than ``kernel_sample_retention_days`` (service.kernel_samples),
once every PRUNE_INTERVAL_S, a bounded number of batches at a time: a pass that left some goes on at the
next sweep.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from datetime import datetime, timedelta
from typing import Any

from celery import Celery
from sqlalchemy import select, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.orm import Session

from intelliperf.jobqueue import RUN_JOB, celery_priority
from service.db.models import Job, Worker, utcnow
from service.db.session import Database
from service.deliveries import new_deliveries
from service.job_end import finish
from service.jobs import (
    DueJob,
    add_event,
    due_for_dispatch,
    mark_dispatched,
    unmark_dispatched,
    unsent_among,
)
from service.kernel_samples import prune_samples
from service.settings import ServiceSettings

__all__ = ["MAX_RUNS", "Dispatcher", "lost_run"]

log = logging.getLogger(__name__)

MAX_RUNS = 2  # a job whose worker died is run once more, then failed
COALESCE_S = 0.01  # a burst of submissions goes out in one pass (one query, one broker connection)
# Under a steady stream of submissions, passes start at most this often: each costs a transaction and a
# broker round trip whatever it sends. At 300 submissions/s, 0.2 s against 0.05 s (side by side, with the
# one-statement submission): 2.5-2.8 against 3.2-3.7 ms of server CPU per submission, POST p99 21-37
# against 26-75 ms. An idle dispatcher still sends a submission after COALESCE_S, and 0.2 s stays far
# inside the 500 ms dispatch target.
MIN_PASS_INTERVAL_S = 0.2
PRUNE_INTERVAL_S = 3600.0  # kernel samples are kept for days: an hour's lateness deletes none too late


def lost_run(
    job: Job,
    worker: Worker | None,
    cutoff: datetime,
    grace: timedelta,
    heard_since: datetime | None = None,
) -> str | None:
    """Why the run of a running ``job`` is lost, or None while it may be alive. ``cutoff``: heartbeats
    before it are stale; ``grace``: how long after the claim a worker's heartbeat must name the job;
    ``heard_since``: since when the service could hear heartbeats (its start, or the end of its last
    database outage): silence before it is not counted.

    Three ways to lose a run: the worker's name beats with another process's run id (a worker restarted
    under the same name); the process that claimed it beats, well after the claim, without naming it (its
    final write failed, say, while the database was away); or nothing beats any more."""
    if worker is not None and job.worker_run and worker.run_id and job.started_at is not None:
        since_claim = worker.last_heartbeat - job.started_at
        if worker.run_id != job.worker_run and since_claim > timedelta(0):
            return (
                f"worker {job.worker} restarted (its process {worker.run_id[:8]} is not the one that "
                f"started the job, {job.worker_run[:8]})"
            )
        if worker.run_id == job.worker_run and worker.current_job != job.id and since_claim > grace:
            doing = f"job {worker.current_job}" if worker.current_job else "no job"
            return f"worker {job.worker} is no longer running it (its heartbeat names {doing})"
    last_seen = worker.last_heartbeat if worker is not None else job.started_at
    if last_seen is None or last_seen >= cutoff or (job.started_at and job.started_at >= cutoff):
        return None
    if heard_since is not None and heard_since >= cutoff:
        return None
    return f"worker {job.worker} stopped sending heartbeats (last at {last_seen:%H:%M:%S} UTC)"


class Dispatcher:
    def __init__(self, db: Database, celery: Celery, settings: ServiceSettings) -> None:
        self.db = db
        self.celery = celery
        self.settings = settings
        self.broker_error: str | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._broker_run_id: str | None = None
        self._lock = threading.Lock()
        self._pending: list[str] = []  # jobs this process committed, to send at the next pass
        self._look_for_all = False
        self.heard_since = utcnow()
        """Since when this process could hear workers: its start, or the end of its database's last outage."""
        self._database_down = False
        self._next_prune = float("-inf")  # time.monotonic() of the next pruning of kernel samples

    def database_unavailable(self) -> None:
        """The database failed a request: once it answers again, workers get a fresh ``worker_stale_s``
        before their silence counts (their heartbeats went into the outage)."""
        self._database_down = True

    def notify(self, job_id: str | None = None) -> None:
        """A job was committed (``job_id``: this one): send it now rather than at the next sweep. Without
        an id, the next pass looks for every due job."""
        with self._lock:
            if job_id is None:
                self._look_for_all = True
            else:
                self._pending.append(job_id)
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="intelliperf-dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        last_sweep = last_pass = float("-inf")
        while not self._stop.is_set():
            self._wake.wait(timeout=self.settings.dispatch_sweep_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                if time.monotonic() - last_sweep >= self.settings.dispatch_sweep_s:
                    last_sweep = time.monotonic()
                    self._take_pending()  # the sweep sends them with every other due job
                    self.sweep()
                else:  # woken by a submission: send it, with those that follow within COALESCE_S
                    self._stop.wait(max(COALESCE_S, last_pass + MIN_PASS_INTERVAL_S - time.monotonic()))
                    last_pass = time.monotonic()
                    pending, look_for_all = self._take_pending()
                    if look_for_all:
                        self.dispatch_due()
                    elif pending:
                        self.dispatch_jobs(pending)
            except (OperationalError, InterfaceError) as exc:
                self.database_unavailable()
                log.warning("dispatcher: the database is unavailable (%s); retrying", _first_line(exc))
            except Exception:
                log.exception("dispatcher sweep failed; retrying at the next one")

    def _take_pending(self) -> tuple[list[str], bool]:
        with self._lock:
            pending, self._pending = self._pending, []
            look_for_all, self._look_for_all = self._look_for_all, False
        return pending, look_for_all

    def sweep(self) -> int:
        """One pass: reap lost runs, notice a restarted broker, send what is due, and (when it is time)
        delete old kernel samples. Returns jobs sent."""
        self._check_database_back()
        self.reap_lost_runs()
        self._check_broker_restart()
        sent = self.dispatch_due()
        if time.monotonic() >= self._next_prune:
            self.prune_kernel_samples()
        return sent

    def prune_kernel_samples(self) -> int:
        """Delete kernel samples older than ``kernel_sample_retention_days``, at most PRUNE_MAX_BATCHES
        batches; the next sweep goes on if some are left, else the one after PRUNE_INTERVAL_S. Returns how
        many were deleted. Each API process's dispatcher does it: deleting a row twice deletes it once."""
        self._next_prune = time.monotonic() + PRUNE_INTERVAL_S  # a failing pass is not retried every sweep
        cutoff = utcnow() - timedelta(days=self.settings.kernel_sample_retention_days)
        deleted, done = prune_samples(self.db, cutoff)
        if not done:
            self._next_prune = float("-inf")
        if deleted:
            log.info("deleted %d kernel sample(s) older than %s", deleted, f"{cutoff:%Y-%m-%d %H:%M} UTC")
        return deleted

    def dispatch_due(self) -> int:
        """Send every due job: never sent, or sent longer than ``redispatch_after_s`` ago. On PostgreSQL
        this scans the queued jobs, so it runs on the sweep (and when asked to look for all); a
        submission's own job goes by ``dispatch_jobs``, a lookup by primary key."""
        now = utcnow()
        with self.db.session() as session:
            jobs = due_for_dispatch(session, now, timedelta(seconds=self.settings.redispatch_after_s))
            deliveries = self._prepare(session, jobs, now)
        return self._send(jobs, deliveries, now)

    def dispatch_jobs(self, job_ids: list[str]) -> int:
        """Send these jobs if they are still queued and were never sent (the sweep may have sent them)."""
        now = utcnow()
        with self.db.session() as session:
            jobs = unsent_among(session, job_ids)
            deliveries = self._prepare(session, jobs, now)
        return self._send(jobs, deliveries, now)

    @staticmethod
    def _prepare(session: Session, jobs: list[DueJob], now: datetime) -> dict[str, str]:
        """Mark ``jobs`` (locked by the caller's query) sent at ``now`` and give each a new delivery, in the
        caller's transaction, which commits before any message goes out."""
        ids = [job.id for job in jobs]
        mark_dispatched(session, ids, now)
        return new_deliveries(session, ids)

    def _send(self, jobs: list[DueJob], deliveries: dict[str, str], now: datetime) -> int:
        """Publish ``jobs``, marked sent at ``now``; if the broker fails, take the mark back so the next pass
        sends them again."""
        if not jobs:
            return 0
        try:
            # one Redis pipeline for the pass (kombu's publish batch), not a round trip and a new
            # client per message; buffered messages go out when the batch ends
            with self.celery.producer_or_acquire() as producer:
                batch = getattr(producer, "batch", None)
                # in a batch the messages reach Redis when it ends, outside kombu's retry wrapper, which
                # would only cost time per message; a failed batch is sent again by the next pass
                with batch() if batch is not None else contextlib.nullcontext():
                    for job in jobs:
                        self._publish(job, deliveries[job.id], producer, retry=batch is None)
        except Exception as exc:
            self.broker_error = f"{type(exc).__name__}: {exc}"
            # a batch that failed sent none of its messages, or some: count none sent, so the next pass
            # sends them all (a job sent twice is harmless; one marked sent that never reached the broker
            # would wait redispatch_after_s, which it still does if the database fails here too)
            log.warning("broker unavailable, %d job(s) wait in the database: %s", len(jobs), exc)
            with self.db.session() as session:
                unmark_dispatched(session, [job.id for job in jobs], now)
            return 0
        self.broker_error = None
        return len(jobs)

    def _publish(self, job: DueJob, delivery: str, producer: Any = None, *, retry: bool = True) -> None:
        self.celery.send_task(
            RUN_JOB,
            args=[job.id, delivery],
            # what Celery logs of the args: the job id, never the delivery (and without saferepr's cost)
            argsrepr=f"[{job.id!r}, '…']",
            kwargsrepr="{}",
            queue=job.queue,
            priority=celery_priority(job.priority),
            retry=retry,
            retry_policy={"max_retries": 1, "interval_start": 0, "interval_step": 0.5},
            producer=producer,
        )

    def _check_database_back(self) -> None:
        if not self._database_down:
            return
        with self.db.session() as session:
            session.execute(select(1))
        self._database_down = False
        self.heard_since = utcnow()
        log.info("dispatcher: the database answers again; workers' heartbeats are judged from now on")

    def _check_broker_restart(self) -> None:
        run_id = self._broker_identity()
        if run_id is None:
            return
        if self._broker_run_id is not None and run_id != self._broker_run_id:
            with self.db.session() as session:
                resent = session.execute(
                    update(Job).where(Job.status == "queued").values(dispatched_at=None)
                ).rowcount  # type: ignore[attr-defined]
            log.warning("the broker restarted (run_id changed): %d queued job(s) will be sent again", resent)
        self._broker_run_id = run_id

    def _broker_identity(self) -> str | None:
        """Redis's run_id (new after every restart); None for other brokers or when unreachable."""
        if not self.settings.resolved_broker_url.startswith("redis"):
            return None
        try:
            with self.celery.connection_for_write() as connection:
                client: Any = connection.default_channel.client  # type: ignore[attr-defined]
                return str(client.info("server")["run_id"])
        except Exception as exc:
            self.broker_error = f"{type(exc).__name__}: {exc}"
            return None

    def reap_lost_runs(self) -> int:
        """Running jobs whose worker has not been heard from in ``worker_stale_s``, or whose worker process
        is gone although its name lives on (a worker restarted under the same name: a new run id)."""
        cutoff = utcnow() - timedelta(seconds=self.settings.worker_stale_s)
        grace = timedelta(seconds=2 * self.settings.heartbeat_s)
        reaped = 0
        with self.db.session() as session:
            workers = {w.name: w for w in session.scalars(select(Worker))}
            for job in session.scalars(select(Job).where(Job.status == "running").with_for_update()):
                reason = lost_run(job, workers.get(job.worker or ""), cutoff, grace, self.heard_since)
                if reason is None:
                    continue
                if job.cancel_requested:
                    finish(session, job.id, status="cancelled", outcome="cancelled", error=reason)
                elif job.runs < MAX_RUNS:
                    job.status, job.worker, job.dispatched_at, job.started_at = "queued", None, None, None
                    add_event(session, job.id, "state", f"{reason}; queued again", stage="queued")
                else:
                    finish(session, job.id, status="failed", outcome="worker_lost", error=reason)
                job.worker_run = None  # the lost run's writes are refused from now on
                reaped += 1
        if reaped:
            self.notify()
        return reaped


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__

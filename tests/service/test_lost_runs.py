"""When the reaper takes a running job back: the decision alone, on model rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from service.db.models import Job, Worker
from service.dispatch import lost_run

CLAIMED = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
GRACE = timedelta(seconds=20)
CUTOFF = CLAIMED - timedelta(seconds=60)  # every heartbeat below is fresh


def job() -> Job:
    return Job(id="j1", worker="host-gpu0", worker_run="run-a", started_at=CLAIMED, status="running")


def worker(run_id: str, current_job: str | None, beat_after_s: float) -> Worker:
    return Worker(
        name="host-gpu0",
        run_id=run_id,
        current_job=current_job,
        last_heartbeat=CLAIMED + timedelta(seconds=beat_after_s),
    )


def test_the_claiming_process_running_the_job_keeps_it() -> None:
    assert lost_run(job(), worker("run-a", "j1", 30), CUTOFF, GRACE) is None


def test_a_new_process_under_the_same_name_loses_the_old_run_at_once() -> None:
    reason = lost_run(job(), worker("run-b", None, 1), CUTOFF, GRACE)
    assert reason is not None and "restarted" in reason
    assert lost_run(job(), worker("run-b", None, -5), CUTOFF, GRACE) is None  # beat before the claim


def test_the_claiming_process_that_forgot_the_job_loses_it_after_the_grace() -> None:
    assert lost_run(job(), worker("run-a", None, 5), CUTOFF, GRACE) is None  # a beat racing the claim
    reason = lost_run(job(), worker("run-a", None, 30), CUTOFF, GRACE)
    assert reason is not None and "no longer running it (its heartbeat names no job)" in reason
    other = lost_run(job(), worker("run-a", "j2", 30), CUTOFF, GRACE)
    assert other is not None and "names job j2" in other


def test_silence_past_the_stale_limit_loses_it() -> None:
    late_cutoff = CLAIMED + timedelta(seconds=120)
    reason = lost_run(job(), worker("run-a", "j1", 30), late_cutoff, GRACE)
    assert reason is not None and "stopped sending heartbeats" in reason
    assert lost_run(job(), None, CUTOFF, GRACE) is None  # claimed within the stale limit


def test_silence_while_the_service_could_not_hear_is_not_counted() -> None:
    """The service (re)started, or its database came back, at ``heard_since``: a worker silent since before
    then gets a whole stale period from that moment before its run counts as lost."""
    late_cutoff = CLAIMED + timedelta(seconds=120)  # the last beat (at 30 s) is stale
    silent = worker("run-a", "j1", 30)
    assert lost_run(job(), silent, late_cutoff, GRACE, heard_since=late_cutoff) is None
    assert lost_run(job(), silent, late_cutoff, GRACE, heard_since=late_cutoff + timedelta(seconds=1)) is None
    lost = lost_run(job(), silent, late_cutoff, GRACE, heard_since=late_cutoff - timedelta(microseconds=1))
    assert lost is not None and "stopped sending heartbeats" in lost
    restarted = lost_run(job(), worker("run-b", None, 1), late_cutoff, GRACE, heard_since=late_cutoff)
    assert restarted is not None and "restarted" in restarted  # evidence, not silence: still judged

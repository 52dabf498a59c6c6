"""Each fault and attack of benchmarks/faults.py done for real at the tests' scale (a heartbeat every 0.5 s, a
worker presumed dead after 3 s, the API down 8 s): the API in its own process on PostgreSQL, Redis as the
broker, real worker processes. Nothing may be lost, stuck, run twice, duplicated or exposed."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.faults import (
    CI,
    Outcome,
    Stack,
    running_stack,
    scenario_api_down,
    scenario_credentials,
    scenario_lost_replies,
    scenario_many_lines,
    scenario_repository_host,
    scenario_two_workers,
    scenario_worker_killed,
    unprivileged_python,
)
from tests.service.conftest import postgres_database


@pytest.fixture
def stack(redis_url: str) -> Iterator[Stack]:
    # outside pytest's private (0700) temporary folders: a worker running as nobody reaches its own inside
    folder = Path(tempfile.mkdtemp(prefix="intelliperf-faults-", dir="/tmp" if os.geteuid() == 0 else None))
    folder.chmod(0o755)
    try:
        with (
            postgres_database() as database_url,
            running_stack(folder, database_url, redis_url, CI) as running,
        ):
            yield running
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def nothing_wrong(outcome: Outcome) -> None:
    assert outcome.failures() == {}, outcome


@pytest.mark.alone  # it reads every Redis database and every process: other tests' would be found too
def test_a_job_that_reads_everything_it_can_gets_no_credential_and_claims_nothing(stack: Stack) -> None:
    if os.geteuid() == 0 and unprivileged_python() is None:
        pytest.skip(
            "as root the worker must run as nobody (a root job reads any process's memory), and nobody "
            "cannot run this checkout here"
        )
    outcome = scenario_credentials(stack)
    facts = outcome.facts
    nothing_wrong(outcome)
    assert facts["attack_reported"] and facts["secrets_exposed"] == []
    # it did look: every process's command line, the broker's messages with both jobs' deliveries
    assert facts["proc_files_read"] > 10 and facts["jobs_seen_in_broker"] == 2
    assert facts["claims_tried"] > 0 and facts["claims_2xx"] == 0 and facts["claim_statuses"] == [401]
    assert not facts["victim_started_by_attacker"] and facts["victim_runs"] == 1
    names = set(facts["job_env_names"])
    assert not names & {"INTELLIPERF_WORKER_TOKEN", "INTELLIPERF_BROKER_URL", "INTELLIPERF_GITHUB_TOKEN"}


def test_a_repository_on_an_unlisted_host_gets_no_request_and_no_token(stack: Stack) -> None:
    outcome = scenario_repository_host(stack)
    nothing_wrong(outcome)
    assert outcome.facts["submit_refusals"] == [422, 422] and outcome.facts["refusals_name_the_host"]
    assert outcome.facts["worker_outcome"] == "source_error" and outcome.facts["requests_received"] == 0


def test_a_build_printing_1500_lines_at_once_loses_none(stack: Stack) -> None:
    outcome = scenario_many_lines(stack)
    nothing_wrong(outcome)
    [stored] = outcome.facts["long_line_stored_chars"]
    assert 16_000 < stored <= 16_384  # a 100,000-character line, cut to what the worker API takes


def test_the_api_down_longer_than_the_stale_limit_re_runs_no_job(stack: Stack) -> None:
    outcome = scenario_api_down(stack)
    nothing_wrong(outcome)
    assert outcome.facts["api_down_s"] >= 2 * CI.worker_stale_s and outcome.facts["runs"] == [1, 1]


def test_event_batches_whose_reply_was_lost_are_stored_once(stack: Stack) -> None:
    outcome = scenario_lost_replies(stack)
    nothing_wrong(outcome)
    assert outcome.facts["replies_dropped"] >= 2


def test_two_workers_on_one_host_run_ten_jobs_once_each(stack: Stack) -> None:
    outcome = scenario_two_workers(stack)
    nothing_wrong(outcome)
    assert len(set(outcome.facts["workers_listed"])) == 2


def test_a_worker_killed_mid_job_leaves_no_process_and_no_scratch_folder(stack: Stack) -> None:
    outcome = scenario_worker_killed(stack)
    # the job ran under one supervisor; what it and the left processes were doing, should any be left
    assert len(outcome.facts["supervisors"]) == 1, outcome.facts
    assert outcome.failures() == {}, json.dumps(outcome.facts, default=str)
    assert outcome.facts["scratch_folders_during_job"] == 1
    assert outcome.facts["processes_left"] == 0 and outcome.facts["scratch_folders_left"] == 0
    assert outcome.facts["runs"] == 2  # the killed run, and the one that finished it

"""tests/support/processes.py: the kills that tests and the fault benchmark make after a job reach only the
processes they mean, with real processes."""

from __future__ import annotations

import signal
import subprocess
import time
import uuid
from pathlib import Path

from tests.support.processes import end_group, exited, group_members, kill_named, named


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_kill_named_kills_what_still_holds_the_token_and_spares_the_rest() -> None:
    token = f"ipproc-{uuid.uuid4().hex[:10]}"
    meant = subprocess.Popen(["bash", "-c", f"exec -a {token}-sleeper sleep 60"])
    other = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 10
        while named(token) != [meant.pid] and time.monotonic() < deadline:
            time.sleep(0.02)
        # the other's pid stands for a number handed out again to a process that is not the job's
        assert kill_named([meant.pid, other.pid], token) == [meant.pid]
        assert meant.wait(timeout=10) == -9
        assert other.poll() is None
        assert kill_named([meant.pid], token) == []  # reaped: no process to open
    finally:
        other.kill()
        other.wait()
        meant.kill()
        meant.wait()


def test_a_group_is_ended_while_its_leader_waits_unreaped() -> None:
    """The leader exits and leaves a member that ignores SIGINT: the member is killed at the SIGKILL step,
    and the leader stays a zombie (its number, the group id, taken) until the caller reaps it."""
    leader = subprocess.Popen(
        ["bash", "-c", "trap '' INT; sleep 60 & echo $!"], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    assert exited(leader.pid, 10)
    assert state(leader.pid) == "Z" and group_members(leader.pid) == [member]
    began = time.monotonic()
    end_group(leader.pid, ((signal.SIGINT, 0.5), (signal.SIGKILL, 5.0)))
    assert group_members(leader.pid) == [] and time.monotonic() - began < 4.0
    assert state(leader.pid) == "Z"  # not reaped by end_group
    assert leader.wait(timeout=5) == 0
    leader.stdout.close()


def test_exited_waits_at_most_its_timeout_for_a_running_child() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        began = time.monotonic()
        assert not exited(child.pid, 0.3)
        assert 0.25 < time.monotonic() - began < 2.0
    finally:
        child.kill()
        child.wait()

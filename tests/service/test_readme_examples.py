"""The README's copy-paste examples, run as they are written (each the fenced block after an
`<!-- example: NAME -->` line), in a folder holding what a fresh clone has at the paths they name: the
replay with `intelliperf run`, then a real `intelliperf serve` with a job submitted by `intelliperf submit`
and by curl."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.conftest import ROOT
from tests.support.processes import end_group, exited

README = (ROOT / "README.md").read_text()
QUICKSTART = Path("/tmp/intelliperf-quickstart")  # the folders the examples name
JOB_FOLDER, JOB_ARCHIVE = Path("/tmp/transpose-job"), Path("/tmp/transpose-job.tar.gz")
PORT = 8765


def example(name: str) -> str:
    match = re.search(rf"<!-- example: {name} -->\n```sh\n(.*?)\n```", README, re.S)
    assert match is not None, f"README has no example {name!r}"
    return match.group(1)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """What the examples read, at the paths they name."""
    for relative in ("examples/transpose_bank", "tests/fixtures/gpu/transpose_bank/original"):
        shutil.copytree(ROOT / relative, tmp_path / relative, ignore=shutil.ignore_patterns("bin"))
    return tmp_path


def shell(script: str, cwd: Path, home: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``script`` in bash, `intelliperf` on PATH, in a session of its own: whatever it leaves running (the
    service it starts in the background) is ended with it. Output goes through files: a process left in
    the background would hold pipes open."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")}
    env |= {"PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}", "HOME": str(home)}
    env["PYTHONPATH"] = str(ROOT)
    home.mkdir(parents=True, exist_ok=True)
    out_file, err_file = home / "stdout", home / "stderr"
    with out_file.open("w") as out, err_file.open("w") as err:
        process = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            if not exited(process.pid, timeout):
                raise subprocess.TimeoutExpired(process.args, timeout)
        finally:
            # SIGINT to what is left (a service stops as on Ctrl-C), SIGKILL after 20 s; then reap the leader
            end_group(process.pid, ((signal.SIGINT, 20.0), (signal.SIGKILL, 5.0)))
            process.wait()
    return subprocess.CompletedProcess(
        process.args, process.returncode, out_file.read_text(), err_file.read_text()
    )


def test_the_replay_example(clone: Path, tmp_path: Path) -> None:
    done = shell(example("replay"), clone, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "bankConflict in transpose_tiled(float const*, float*, int, int)" in done.stdout


def test_the_submit_and_curl_examples_against_a_service_they_start(clone: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", PORT)) == 0:
            pytest.fail(f"port {PORT}, which the README's example serves on, is taken")
    for path in (QUICKSTART, JOB_FOLDER, JOB_ARCHIVE):
        shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
    try:
        done = shell(example("submit") + "\n" + example("curl"), clone, tmp_path / "home")
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        # submit: followed live, the table, the job's status; the report written where -o said
        assert "== succeeded: diagnosed" in done.stderr and "transpose_tiled" in done.stdout
        assert (clone / "report.json").is_file()
        # curl: the service's answer, a queued job
        assert '"status":"queued"' in done.stdout.replace(" ", "")
        assert (QUICKSTART / "admin-token").is_file()
    finally:
        for path in (QUICKSTART, JOB_FOLDER, JOB_ARCHIVE):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)

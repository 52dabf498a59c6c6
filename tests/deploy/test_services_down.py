"""scripts/services-down stops exactly what scripts/services-up recorded, and nothing else."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_stops_the_recorded_service_and_leaves_others_running(tmp_path: Path) -> None:
    recorded = subprocess.Popen(["sleep", "300"])
    unrecorded = subprocess.Popen(["sleep", "300"])
    socket = tmp_path / "service.sock"
    socket.write_text("")
    state = tmp_path / "started"
    state.write_text(f"podman {recorded.pid} {socket}\n")
    try:
        result = subprocess.run(
            [ROOT / "scripts" / "services-down", state], capture_output=True, text=True, timeout=30
        )
        assert result.returncode == 0, result.stderr
        assert f"stopping podman system service (pid {recorded.pid})" in result.stdout
        assert recorded.wait(timeout=10) is not None
        time.sleep(0.2)
        assert unrecorded.poll() is None  # not recorded: left alone
        assert not socket.exists() and not state.exists()
    finally:
        for process in (recorded, unrecorded):
            process.kill()
            process.wait()


def test_nothing_recorded_stops_nothing(tmp_path: Path) -> None:
    state = tmp_path / "started"
    result = subprocess.run([ROOT / "scripts" / "services-down", state], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == ""

"""The newcomer's main command on the embedded default: `intelliperf serve` (SQLite, filesystem broker,
a local worker) started by scripts/demo.py, examples submitted and diagnosed through it."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.service.conftest import ROOT, free_port


def test_the_demo_diagnoses_examples_through_the_embedded_stack(tmp_path: Path) -> None:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    argv = [sys.executable, "scripts/demo.py", "--replay", "--port", str(free_port())]
    argv += ["--data-dir", str(tmp_path), "--only", "transpose_bank", "--only", "clean_saxpy"]
    result = subprocess.run(
        argv,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    table = lines[lines.index(next(line for line in lines if line.startswith("example"))) + 1 :]
    assert table[0].split() == [
        *("transpose_bank", "bankConflict", "succeeded"),
        *("bankConflict", "in", "transpose_tiled", "at", "transpose.cu:59"),
    ]
    assert table[1].split() == ["clean_saxpy", "none", "succeeded", "no", "bottleneck"]
    assert "timing done" in result.stdout  # the job's events were followed live
    output = result.stdout + result.stderr  # the server's access log and Celery's banner go to the log
    assert "POST /v1/jobs" not in output and "celery@" not in output
    assert "POST /v1/jobs" in (tmp_path / "serve.log").read_text()  # serve's own log, in its data folder
    assert "dashboard:" not in result.stdout  # without --keep the stack stops: no address to a dead server
    assert "run with --keep to browse these jobs" in result.stdout
    assert (tmp_path / "intelliperf.db").is_file() and (tmp_path / "admin-token").stat().st_mode & 0o077 == 0


def _demo_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("demo", ROOT / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_demo_serves_on_a_free_port_when_its_own_is_taken(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = _demo_module()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        monkeypatch.setattr(demo, "PREFERRED_PORT", busy)
        chosen = demo.choose_port(None)
        assert chosen != busy and demo.port_is_free(chosen)
        assert (
            f"port {busy} is taken by another program: the demo serves on port {chosen}"
            in capsys.readouterr().out
        )
        with pytest.raises(SystemExit, match=f"port {busy} is taken by another program"):
            demo.choose_port(busy)  # asked for by name: refused, not replaced
    assert demo.choose_port(None) == busy  # free again: the preferred port

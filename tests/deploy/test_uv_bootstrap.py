"""scripts/uv without a uv on PATH: it builds its own environment once per checkout, and two first runs at
once (scripts/test beside scripts/device-wheels) take turns instead of building over each other (which
left a virtual environment whose Python could not load its ssl module). A stand-in for python3 plays
`venv` and `pip install uv` (the package index is not reached from tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE_PYTHON = """#!/usr/bin/env bash
if [ "$1" = "-m" ] && [ "$2" = venv ]; then
    mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && echo "$3" >> "$VENVS_LOG"; exit 0
fi
if [ "$1" = "-m" ] && [ "$2" = pip ]; then
    uv="$(dirname "$0")/uv"
    sleep 1; printf '#!/bin/sh\\necho "uv 9.9 $*"\\n' > "$uv"; chmod +x "$uv"; exit 0
fi
exit 3
"""


def checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "uv", root / "scripts" / "uv")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python3").write_text(FAKE_PYTHON)
    (fake / "python3").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "VENVS_LOG": str(tmp_path / "venvs.log"), "HOME": str(tmp_path)}
    return root, env


def test_two_first_runs_build_one_environment_and_both_run_uv(tmp_path: Path) -> None:
    root, env = checkout(tmp_path)
    assert shutil.which("uv", path=env["PATH"]) is None
    command = [str(root / "scripts" / "uv"), "--version"]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    runs = [subprocess.Popen(command, env=env, **pipes) for _ in range(2)]
    outputs = [run.communicate(timeout=60) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    assert [out for out, _ in outputs] == ["uv 9.9 --version\n"] * 2
    assert sum("installing it into" in err for _, err in outputs) == 1
    assert len((tmp_path / "venvs.log").read_text().splitlines()) == 1  # built once, aside
    assert (root / ".uv-bootstrap" / "bin" / "uv").is_file()
    assert not (root / ".uv-bootstrap.building").exists()
    again = subprocess.run([str(root / "scripts" / "uv"), "x"], env=env, capture_output=True, text=True)
    assert (again.returncode, again.stdout, again.stderr) == (0, "uv 9.9 x\n", "")


def test_a_failed_install_is_not_trusted_and_the_next_run_builds_again(tmp_path: Path) -> None:
    root, env = checkout(tmp_path)
    fake = tmp_path / "bin" / "python3"
    working = fake.read_text()
    fake.write_text(working.replace("sleep 1;", "exit 4;"))
    command = [str(root / "scripts" / "uv"), "--version"]
    failed = subprocess.run(command, env=env, capture_output=True, text=True)
    assert failed.returncode != 0 and not (root / ".uv-bootstrap").exists()
    fake.write_text(working)
    again = subprocess.run(command, env=env, capture_output=True, text=True)
    assert (again.returncode, again.stdout) == (0, "uv 9.9 --version\n"), again.stderr
    assert sorted(os.listdir(root)) == [".uv-bootstrap", "scripts"]

"""How the counter pass drives ncu: the source page goes to ncu's log file, errors are read from it.

ncu cannot run here, so a small script stands in for it, doing what ncu 2025.3 did on the device:
messages and the printed page go to `--log-file`, the application's output to stdout.
"""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from benchmarks.ncu.pages import profile_command, run_ncu
from intelliperf.errors import ProfileError

FAKE_NCU = """#!/bin/bash
log=""; report=""
while [ $# -gt 0 ]; do
  case "$1" in
    --log-file) log="$2"; shift;;
    --export) report="$2"; shift;;
    --) shift; break;;
  esac
  shift
done
echo "application output"
printf '%s\\n' "$NCU_LOG" > "$log"
[ "$NCU_EXIT" = 0 ] && touch "$report"
exit "$NCU_EXIT"
"""


@pytest.fixture
def fake_ncu(tmp_path: Path) -> Path:
    path = tmp_path / "ncu"
    path.write_text(FAKE_NCU)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_the_source_page_is_printed_into_the_log_not_stdout(tmp_path: Path) -> None:
    command = profile_command(
        "ncu",
        ["./app", "-n", "3"],
        kernel_names=["k"],
        metrics=["m"],
        report=tmp_path / "r",
        log=tmp_path / "l",
    )
    assert command[-3:] == ["./app", "-n", "3"]
    assert command[command.index("--log-file") + 1] == str(tmp_path / "l")
    assert command[command.index("--page") + 1] == "source"
    assert command[command.index("--print-source") + 1] == "cuda,sass"
    assert "--csv" in command and command[command.index("--export") + 1] == str(tmp_path / "r")


def test_run_ncu_returns_the_page_from_the_log(
    fake_ncu: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = '"File Path","/src/k.cu"\n"Function Name","_Z1kv"'
    monkeypatch.setenv("NCU_LOG", f"==PROF== Connected to process 1\n{page}")
    monkeypatch.setenv("NCU_EXIT", "0")
    work = tmp_path / "work"
    work.mkdir()
    run = run_ncu(
        str(fake_ncu),
        ["./app"],
        cwd=tmp_path,
        kernel_names=["_Z1kv"],
        metrics=["m"],
        workdir=work,
        timeout_s=30,
    )
    assert page in run.log and "application output" not in run.log


def test_ncu_errors_in_the_log_reach_the_user(
    fake_ncu: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NCU_LOG", "==ERROR== Failed to find metric lts__nonexistent.sum")
    monkeypatch.setenv("NCU_EXIT", "1")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(ProfileError) as error:
        run_ncu(
            str(fake_ncu),
            ["./app"],
            cwd=tmp_path,
            kernel_names=["k"],
            metrics=["m"],
            workdir=work,
            timeout_s=30,
        )
    assert "Failed to find metric lts__nonexistent.sum" in error.value.log_tail
    assert "application output" in error.value.log_tail

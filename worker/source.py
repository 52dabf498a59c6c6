"""The project a job runs on: its uploaded archive, or a clone of its repository at the exact commit.

A token for cloning is passed to git through the environment of that one command (an askpass helper
reads it), so it never appears in a URL, a command line, the database or a log.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from pathlib import Path

from intelliperf.contract import RepositoryRef
from intelliperf.project_archive import ArchiveLimits, extract_project

__all__ = ["SourceError", "checkout", "from_archive"]

CLONE_TIMEOUT_S = 600
ASKPASS = """#!/bin/sh
case "$1" in Username*) echo x-access-token;; *) echo "$INTELLIPERF_GIT_TOKEN";; esac
"""


class SourceError(RuntimeError):
    """The project could not be fetched; the message says why (and never holds the token)."""


def from_archive(data: bytes, destination: Path, limits: ArchiveLimits | None = None) -> Path:
    return extract_project(data, destination, limits)


def _git(args: list[str], cwd: Path, env: dict[str, str], token: str | None) -> None:
    result = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLONE_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        message = (result.stderr or result.stdout).strip().splitlines()[-3:]
        text = "\n".join(message)
        if token:
            text = text.replace(token, "***")
        raise SourceError(f"git {args[0]} failed: {text}")


def checkout(repository: RepositoryRef, destination: Path, token: str | None = None) -> Path:
    """Clone ``repository`` into ``destination`` and check out its commit (or ref); returns it."""
    destination.mkdir(parents=True, exist_ok=False)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    with tempfile.TemporaryDirectory(prefix="intelliperf-askpass-") as helper_dir:
        if token:
            askpass = Path(helper_dir) / "askpass.sh"
            askpass.write_text(ASKPASS)
            askpass.chmod(stat.S_IRWXU)
            env |= {"GIT_ASKPASS": str(askpass), "INTELLIPERF_GIT_TOKEN": token}
        _git(["init", "--quiet"], destination, env, token)
        _git(["remote", "add", "origin", repository.url], destination, env, token)
        target = repository.commit or repository.ref
        _git(["fetch", "--quiet", "--depth", "1", "origin", target], destination, env, token)
        _git(["checkout", "--quiet", "FETCH_HEAD"], destination, env, token)
    return destination

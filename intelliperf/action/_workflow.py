"""The runner's side of a step: workflow commands on stdout and the files GitHub reads afterwards.

Workflow commands (``::add-mask::``, ``::group::``, ``::error::``) are lines on stdout that the runner
acts on; outputs and the job summary are files named by ``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY``.
Outside a runner (no such variables) outputs go nowhere and the summary is only printed as a notice.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TextIO

__all__ = ["Workflow"]


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


class Workflow:
    """Writes workflow commands to ``out`` and outputs/summary to the files the environment names."""

    def __init__(self, env: Mapping[str, str], out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self.output_file = Path(env["GITHUB_OUTPUT"]) if env.get("GITHUB_OUTPUT") else None
        self.summary_file = Path(env["GITHUB_STEP_SUMMARY"]) if env.get("GITHUB_STEP_SUMMARY") else None
        self._in_group = False

    def line(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def mask(self, secret: str) -> None:
        """Every line of the secret is masked (the runner masks per line)."""
        for part in secret.splitlines() or [secret]:
            if part.strip():
                self.line(f"::add-mask::{part}")

    def _command(self, name: str, message: str, title: str | None) -> None:
        props = f" title={_escape_property(title)}" if title else ""
        self.line(f"::{name}{props}::{_escape_data(message)}")

    def error(self, message: str, title: str | None = None) -> None:
        self._command("error", message, title)

    def warning(self, message: str, title: str | None = None) -> None:
        self._command("warning", message, title)

    def notice(self, message: str, title: str | None = None) -> None:
        self._command("notice", message, title)

    @contextlib.contextmanager
    def group(self, title: str) -> Iterator[None]:
        """A foldable section of the log; groups do not nest, so an open one is closed first."""
        if self._in_group:
            self.line("::endgroup::")
        self.line(f"::group::{title}")
        self._in_group = True
        try:
            yield
        finally:
            if self._in_group:
                self.line("::endgroup::")
                self._in_group = False

    def set_output(self, name: str, value: str) -> None:
        """``name<<DELIMITER`` / value / ``DELIMITER``: safe for any value, multiline included."""
        if self.output_file is None:
            return
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
        with self.output_file.open("a", encoding="utf-8") as sink:
            sink.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")

    def add_summary(self, markdown: str) -> None:
        if self.summary_file is None:
            return
        with self.summary_file.open("a", encoding="utf-8") as sink:
            sink.write(markdown.rstrip("\n") + "\n\n")

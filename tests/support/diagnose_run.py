"""Running `intelliperf run` on a bundled example, for the GPU tests of the diagnosis."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MANIFEST = json.loads((EXAMPLES / "examples.json").read_text())


def intelliperf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "intelliperf", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def marker_line(example: dict) -> int:
    lines = (EXAMPLES / example["name"] / example["source"]).read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if f"intelliperf: {example['formula']}" in text)


def run_example(example: dict, app: str, formula: str, tmp_path: Path) -> dict:
    report = tmp_path / "report.json"
    build = ["-b", example["build"]] if example["build"] else []
    result = intelliperf(
        "run",
        "-f",
        formula,
        *build,
        "-p",
        str(EXAMPLES / example["name"]),
        "-o",
        str(report),
        "--",
        app,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(report.read_text())

"""Benchmarks are a package run as `python -m benchmarks.<name>`: none puts the repository on sys.path
itself, and the README runs them that way."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HACK = re.compile(r"^\s*sys\.path\.insert\(0, str\(ROOT\)\)", re.MULTILINE)


def test_no_benchmark_puts_the_repository_on_sys_path() -> None:
    hacks = sorted(path.name for path in (ROOT / "benchmarks").rglob("*.py") if HACK.search(path.read_text()))
    assert hacks == [], f"run as `python -m benchmarks.<name>` instead: {hacks}"


def test_the_readme_runs_benchmarks_as_modules() -> None:
    assert re.findall(r"python3? benchmarks/(\w+)\.py", (ROOT / "README.md").read_text()) == []


def test_a_path_hack_is_found(tmp_path: Path) -> None:
    script = tmp_path / "x.py"
    script.write_text("import sys\nROOT = 1\nsys.path.insert(0, str(ROOT))\n")
    assert HACK.search(script.read_text())

"""Benchmarks are a package run as `python -m benchmarks.<name>`: none puts the repository on sys.path
itself, but the three whose files the GPU record covers (changing them re-runs their parts on a GPU;
they go with their next record)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HACK = re.compile(r"^\s*sys\.path\.insert\(0, str\(ROOT\)\)", re.MULTILINE)
RECORDED = {"counter_pass.py", "diagnose.py", "event_harness.py"}


def test_no_benchmark_puts_the_repository_on_sys_path() -> None:
    hacks = {path.name for path in (ROOT / "benchmarks").glob("*.py") if HACK.search(path.read_text())}
    assert hacks == RECORDED, f"run as `python -m benchmarks.<name>` instead: {sorted(hacks - RECORDED)}"


def test_the_readme_runs_benchmarks_as_modules() -> None:
    stale = re.findall(r"python3? benchmarks/(\w+)\.py", (ROOT / "README.md").read_text())
    assert set(stale) <= {name.removesuffix(".py") for name in RECORDED}, stale

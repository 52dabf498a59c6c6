"""What the product's packages may import: the test doubles in intelliperf.testing (a scripted LLM, a fake
GitHub, throwaway databases) serve tests and benchmarks only; what jobs run, replayed loops included,
lives in the product's own modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("intelliperf", "worker", "service", "accordo", "formulas")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_product_module_imports_the_test_doubles() -> None:
    offenders = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.is_relative_to(ROOT / "intelliperf" / "testing"):
                continue
            if any(name.startswith("intelliperf.testing") for name in imported_modules(path)):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_the_check_sees_an_import_of_the_test_doubles(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from intelliperf.testing.scripted_llm import ScriptedLLM\n")
    assert "intelliperf.testing.scripted_llm" in imported_modules(module)


ENGINE_PARTS = (
    "intelliperf.engine.job",
    "intelliperf.gpu.select",
    "intelliperf.llm.proposer",
    "intelliperf.llm.client",
    "intelliperf.engine.recorded_loop",
)


def test_the_cli_and_the_worker_drive_the_engine_only_through_run_spec() -> None:
    """One engine entry point: neither front end builds a backend, a proposer or a judge of its own."""
    for front in (ROOT / "intelliperf" / "cli.py", ROOT / "worker" / "engine_main.py"):
        imported = imported_modules(front)
        assert "intelliperf.engine.entry" in imported, front
        assert not imported & set(ENGINE_PARTS), (front, imported & set(ENGINE_PARTS))

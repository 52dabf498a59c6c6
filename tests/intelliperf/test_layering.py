"""What the product's packages may import: the test doubles in tests/support (a scripted LLM, a fake
GitHub, throwaway databases) serve tests and benchmarks only and do not ship in the package; what jobs
run, replayed loops included, lives in the product's own modules; Nsight Compute's pass and readers
(benchmarks/ncu) are a reference outside the product."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("intelliperf", "worker", "service", "accordo", "profiler", "formulas")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def imports_tests(path: Path) -> bool:
    return any(name == "tests" or name.startswith("tests.") for name in imported_modules(path))


def test_no_product_module_imports_the_test_doubles() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if imports_tests(path)
    ]
    assert offenders == []


def test_the_doubles_live_with_the_tests_not_in_a_product_package() -> None:
    assert (ROOT / "tests" / "support" / "scripted_llm.py").is_file()
    shipped = [
        p for package in PRODUCT for p in (ROOT / package).rglob("*.py") if "ScriptedLLM" in p.read_text()
    ]
    assert shipped == []


def test_the_check_sees_an_import_of_the_test_doubles(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from tests.support.scripted_llm import ScriptedLLM\n")
    assert imports_tests(module)
    module.write_text("import testsuite\n")
    assert not imports_tests(module)


NCU_NAME = re.compile(r"(?:^|_)ncu(?:_|$)")
"""A module name part that names Nsight Compute (`ncu`, `ncu_source`, `ncu_report`), not `concurrent`."""


def names_ncu(module: str) -> bool:
    return any(NCU_NAME.search(part) for part in module.split("."))


def benchmark_or_ncu_imports(path: Path) -> list[str]:
    return sorted(
        name
        for name in imported_modules(path)
        if name == "benchmarks" or name.startswith("benchmarks.") or names_ncu(name)
    )


def test_no_product_module_imports_benchmarks_or_nsight_compute() -> None:
    """Nsight Compute, the counter pass until 2026-11-27, lives in benchmarks/ncu as the CUPTI pass's
    reference; the product neither imports it nor has a module named for it."""
    offenders = [
        (str(path.relative_to(ROOT)), imported)
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if (imported := benchmark_or_ncu_imports(path))
    ]
    assert offenders == []
    named = [
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*"))
        if names_ncu(path.stem) and "__pycache__" not in path.parts
    ]
    assert named == []


def test_the_check_sees_an_import_of_benchmarks_or_of_nsight_compute(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from concurrent.futures import Future\nimport ncu_report\n"
        "def f():\n    from benchmarks.ncu.pages import parse_raw_csv\n"
    )
    assert benchmark_or_ncu_imports(module) == ["benchmarks.ncu.pages", "ncu_report"]
    module.write_text("from intelliperf.gpu.nvidia.ncu_source import sum_metrics\nimport benchmarks\n")
    assert benchmark_or_ncu_imports(module) == ["benchmarks", "intelliperf.gpu.nvidia.ncu_source"]
    module.write_text("import concurrent.futures\nfrom intelliperf.gpu.nvidia import profiles\n")
    assert benchmark_or_ncu_imports(module) == []


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


def test_the_engines_cli_loads_neither_the_service_nor_the_worker() -> None:
    """`intelliperf run` needs neither; their commands join the CLI when the program runs (full_app)."""
    code = (
        "import sys, intelliperf.cli as c; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('service', 'worker'))); "
        "c.full_app(); print(sorted({m.split('.')[0] for m in sys.modules} & {'service', 'worker'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    before, after = done.stdout.splitlines()
    assert before == "[]" and after == "['service', 'worker']"


def test_the_service_does_not_import_the_worker() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "service").rglob("*.py"))
        if any(name == "worker" or name.startswith("worker.") for name in imported_modules(path))
    ]
    assert offenders == []


def test_the_worker_does_not_import_the_service() -> None:
    """A GPU node runs the worker with the broker, the service's URL and its token: no database, no secret
    key, none of the service's modules (it talks to the worker API)."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "worker").rglob("*.py"))
        if any(name == "service" or name.startswith("service.") for name in imported_modules(path))
    ]
    assert offenders == []


NVIDIA_ROOM = "intelliperf/gpu/nvidia/"
"""The NVIDIA backend's room (and profiler/ and accordo/, CUDA's own libraries, not looked at). Everything
else speaks the formulas' vendor-neutral quantities (intelliperf.contract.profile)."""
NCU_METRIC = re.compile(r"\b(?:gpu|sm|smsp|lts|l1tex|dram|launch|device)__[a-z0-9_]+")
SASS_OPCODE = re.compile(r"\b(?:REDG?|ATOMG?|ATOMS|LDG|STG|LDL|STL|STS)\b")
NVIDIA_TOOL = re.compile(r"nvidia-smi")


def test_no_ncu_metric_sass_opcode_or_nvidia_smi_outside_the_nvidia_backend() -> None:
    """(LDS is not looked for: it is also AMD's name for its shared memory, the Local Data Share.)"""
    offenders = []
    for package in ("intelliperf", "worker", "service", "formulas"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative.startswith(NVIDIA_ROOM):
                continue
            text = path.read_text()
            found = NCU_METRIC.findall(text) + SASS_OPCODE.findall(text) + NVIDIA_TOOL.findall(text)
            if found:
                offenders.append((relative, sorted(set(found))))
    assert offenders == []

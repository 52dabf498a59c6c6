"""The floors of ARCHITECTURE.md: what each room of the product may import, one test per rule, each rule
also shown to catch a module that breaks it."""

from __future__ import annotations

from pathlib import Path

from tests.intelliperf.test_layering import imported_modules  # every absolute import, lazy ones too

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("intelliperf", "formulas", "accordo", "profiler", "service", "worker")


def room(module: str) -> str:
    """'intelliperf.gpu.nvidia.backend' -> 'intelliperf.gpu'; 'service.api.jobs' -> 'service'."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "intelliperf" and len(parts) > 1 else parts[0]


def edges(root: Path = ROOT) -> set[tuple[str, str, str]]:
    """(importing room, imported room, file) for every import between rooms of the product or into
    tests/benchmarks."""
    found = set()
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
            here = room(module)
            for name in imported_modules(path):
                top = name.split(".")[0]
                if top in (*PRODUCT, "tests", "benchmarks") and room(name) != here:
                    found.add((here, room(name), str(path.relative_to(root))))
    return found


Edges = set[tuple[str, str, str]]


def allowed_only(source: str, allowed: set[str], found: Edges | None = None) -> list[str]:
    return sorted(
        f"{file}: {src} imports {dst}"
        for src, dst, file in (edges() if found is None else found)
        if (src == source or src.startswith(source + "."))
        and dst.split(".")[0] in (*PRODUCT, "tests", "benchmarks")
        and dst not in allowed
        and not any(dst.startswith(a + ".") for a in allowed)
    )


def never(source: str, forbidden: set[str], found: Edges | None = None) -> list[str]:
    return sorted(
        f"{file}: {src} imports {dst}"
        for src, dst, file in (edges() if found is None else found)
        if (src == source or src.startswith(source + "."))
        and (dst in forbidden or dst.split(".")[0] in forbidden)
    )


def test_the_judge_imports_only_the_ground_floor_and_the_profiler() -> None:
    ground = {"intelliperf.contract", "intelliperf.errors", "intelliperf.process"}
    assert allowed_only("accordo", {*ground, "profiler"}) == []


def test_the_profiler_imports_only_the_ground_floor() -> None:
    """The native profiler runs applications and reads what its library wrote: no judge, no formula, no
    backend (a backend stands on it)."""
    assert (
        allowed_only("profiler", {"intelliperf.contract", "intelliperf.errors", "intelliperf.process"}) == []
    )


def test_formulas_see_only_the_contract() -> None:
    assert allowed_only("formulas", {"intelliperf.contract", "intelliperf.errors"}) == []


def test_tracking_is_arithmetic() -> None:
    assert allowed_only("intelliperf.tracking", set()) == []


def test_the_api_host_runs_no_gpu_code() -> None:
    assert never("service", {"worker", "intelliperf.engine", "intelliperf.gpu", "accordo", "profiler"}) == []


def test_workers_talk_to_the_service_over_http() -> None:
    assert never("worker", {"service"}) == []


def test_backends_do_not_drive_the_loop() -> None:
    assert never("intelliperf.gpu", {"intelliperf.engine", "intelliperf.llm", "service", "worker"}) == []


def test_nothing_in_the_product_imports_tests_or_benchmarks() -> None:
    assert sorted(f"{file}: {dst}" for _, dst, file in edges() if dst in ("tests", "benchmarks")) == []


def test_the_contract_is_the_ground_floor() -> None:
    """The contract (the job spec, the report, the profile types every backend, formula and judge use)
    imports nothing of the product but the error types: whether a formula name is installed is asked
    where a spec is made (formulas.registry.formula_problems), not by the contract."""
    ground = {"intelliperf.contract", "intelliperf.errors"}
    stray = [
        f"{file}: {src} imports {dst}"
        for src, dst, file in edges()
        if src == "intelliperf.contract" and dst not in ground
    ]
    assert stray == []


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of the product -> the modules of the product it imports (lazily too), each import
    resolved to the longest module it names."""
    modules = {
        ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): path
        for package in PRODUCT
        for path in sorted((root / package).rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for name in imported_modules(path):
            parts = name.split(".")
            prefixes = (".".join(parts[:n]) for n in range(len(parts), 0, -1))
            found = next((prefix for prefix in prefixes if prefix in modules), None)
            if found is not None and found != module:
                targets.add(found)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: its strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_of_the_product_imports_one_that_imports_it() -> None:
    assert cycles(module_graph()) == []


def test_a_cycle_of_lazy_imports_is_found(tmp_path: Path) -> None:
    for package in PRODUCT:
        (tmp_path / package).mkdir()
    (tmp_path / "service" / "jobs.py").write_text("def end():\n    from service.regressions import answer\n")
    (tmp_path / "service" / "regressions.py").write_text("from service.jobs import submit\n")
    (tmp_path / "service" / "alone.py").write_text("import service.jobs\n")
    assert cycles(module_graph(tmp_path)) == [["service.jobs", "service.regressions"]]


def test_a_module_that_breaks_a_rule_is_caught(tmp_path: Path) -> None:
    for package in PRODUCT:
        (tmp_path / package).mkdir()
    (tmp_path / "accordo" / "judge.py").write_text("def f():\n    from intelliperf.engine.job import run\n")
    (tmp_path / "service" / "api.py").write_text("import worker.runner\n")
    (tmp_path / "intelliperf" / "tracking").mkdir()
    (tmp_path / "intelliperf" / "tracking" / "x.py").write_text("from intelliperf.contract import Report\n")
    found = edges(tmp_path)
    assert allowed_only("accordo", {"intelliperf.contract"}, found) == [
        "accordo/judge.py: accordo imports intelliperf.engine"
    ]
    assert never("service", {"worker"}, found) == ["service/api.py: service imports worker"]
    assert allowed_only("intelliperf.tracking", set(), found) == [
        "intelliperf/tracking/x.py: intelliperf.tracking imports intelliperf.contract"
    ]

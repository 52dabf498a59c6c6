"""What the contract cannot check about a job spec, because it depends on what is installed: that each
formula it names is a registered formula (formulas.registry) and that its GPU vendor has a backend
(intelliperf.vendors). Asked by every door that makes a spec (the CLI, the Action, the API, the MCP
server) and by the engine, before any work."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from formulas.registry import formula_problems
from intelliperf.contract import JobSpec
from intelliperf.errors import SpecError
from intelliperf.vendors import vendor_problem

__all__ = ["check_spec", "spec_problems"]

Problem = tuple[tuple[str | int, ...], str]


def spec_problems(spec: JobSpec | Mapping[str, Any]) -> list[Problem]:
    """Each problem of ``spec`` (a JobSpec, or the mapping that validated as one: then a sole
    application's formula is said where it was written): where in the spec, and why."""
    data = spec.model_dump() if isinstance(spec, JobSpec) else spec
    problems = formula_problems(data)
    gpu = data.get("gpu")
    vendor = gpu.get("vendor") if isinstance(gpu, Mapping) else None
    if isinstance(vendor, str) and (why := vendor_problem(vendor)) is not None:
        problems.append((("gpu", "vendor"), why))
    return problems


def check_spec(spec: JobSpec) -> None:
    """Raises SpecError with the first of ``spec``'s problems (spec_problems)."""
    problems = spec_problems(spec)
    if problems:
        raise SpecError(problems[0][1])

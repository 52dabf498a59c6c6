"""The formula registry: in-tree formulas first, then plugins from the `intelliperf.formulas` entry points.

Built once on first use. Registration is checked (unique name, exactly one concrete Formula subclass
per module, declared quantities that every backend knows: intelliperf.contract.profile) so a broken
plugin fails loudly at start, not halfway through a job.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

from formulas.base import Formula
from formulas.throughput import UNITS
from intelliperf.contract import JobSpec
from intelliperf.contract.profile import Quantity
from intelliperf.errors import SpecError

__all__ = [
    "BUILTIN_MODULES",
    "META_FORMULAS",
    "FormulaRegistrationError",
    "all_formulas",
    "formula_problems",
    "get",
    "names",
]

BUILTIN_MODULES = (
    "formulas.bank_conflict",
    "formulas.atomic_contention",
    "formulas.memory_access",
    "formulas.register_pressure",
    "formulas.branch_divergence",
    "formulas.memory_locality",
    "formulas.occupancy",
)
META_FORMULAS = ("auto", "diagnoseOnly")
ENTRY_POINT_GROUP = "intelliperf.formulas"


class FormulaRegistrationError(RuntimeError):
    pass


def concrete_formula(module: ModuleType) -> type[Formula]:
    found = [
        obj
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, Formula) and not inspect.isabstract(obj) and obj.__module__ == module.__name__
    ]
    if len(found) != 1:
        raise FormulaRegistrationError(
            f"{module.__name__} must define exactly one concrete Formula subclass, found {len(found)}"
        )
    return found[0]


def validate(cls: type[Formula], taken: dict[str, type[Formula]]) -> None:
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not re.match(r"^[a-z][A-Za-z0-9]*$", name):
        raise FormulaRegistrationError(f"{cls.__qualname__}: name must be lowerCamelCase, got {name!r}")
    if name in taken or name in META_FORMULAS:
        raise FormulaRegistrationError(f"{cls.__qualname__}: formula name {name!r} is already taken")
    if not getattr(cls, "metrics", None) and not cls.units:
        raise FormulaRegistrationError(f"{name}: declares no metrics and no memory units")
    bad = [m for m in cls.metrics if not isinstance(m, Quantity)]
    if bad:
        raise FormulaRegistrationError(
            f"{name}: metrics must be intelliperf.contract.profile.Quantity members (a backend maps each "
            f"onto its profiler), got {bad}"
        )
    unknown = [unit for unit in cls.units if unit not in UNITS]
    if unknown:
        raise FormulaRegistrationError(f"{name}: unknown memory units {unknown}; known: {', '.join(UNITS)}")
    if not getattr(cls, "title", "") or not getattr(cls, "metric_label", ""):
        raise FormulaRegistrationError(f"{name}: title and metric_label must be set")


@cache
def all_formulas() -> dict[str, type[Formula]]:
    registry: dict[str, type[Formula]] = {}
    modules = [importlib.import_module(name) for name in BUILTIN_MODULES]
    modules += [ep.load() for ep in entry_points(group=ENTRY_POINT_GROUP)]
    for module in modules:
        cls = concrete_formula(module)
        validate(cls, registry)
        registry[cls.name] = cls
    return registry


def names() -> list[str]:
    return list(all_formulas())


def formula_problems(spec: JobSpec | Mapping[str, Any]) -> list[tuple[tuple[str | int, ...], str]]:
    """Each formula name in ``spec`` that no installed formula (built-in or plugin) and no meta name has:
    where in the spec it is, and why. The doors that make a spec (the CLI, the Action, the API, the engine)
    ask this before any work; the contract itself checks only a name's form (it is the ground floor, and
    the registry stands on it). A door that has the spec as it was sent (a mapping that validated as a
    JobSpec) passes that, so that a sole application's formula, which JobSpec lifts to the spec's, is
    said where it was written."""
    data = spec.model_dump() if isinstance(spec, JobSpec) else spec
    apps = data.get("applications") or []
    named: list[tuple[tuple[str | int, ...], str]] = [
        (("applications", index, "formula"), app["formula"])
        for index, app in enumerate(apps)
        if isinstance(app, Mapping) and isinstance(app.get("formula"), str)
    ]
    if isinstance(data.get("formula"), str):
        named.append((("formula",), data["formula"]))
    known = [*names(), *META_FORMULAS]
    return [
        (where, f"unknown formula {name!r}; choose one of: {', '.join(known)}")
        for where, name in named
        if name not in known
    ]


def get(name: str) -> type[Formula]:
    try:
        return all_formulas()[name]
    except KeyError:
        choices = ", ".join([*names(), *META_FORMULAS])
        raise SpecError(f"unknown formula {name!r}; choose one of: {choices}") from None

"""GPU backends by vendor: the in-tree ones, then plugins from the `intelliperf.backends` entry points.

A plugin is an entry point in that group whose name is the vendor and whose object is a GpuBackend
subclass, as formulas are plugins of `intelliperf.formulas`. Loaded once, on first use; a plugin that is not
a backend fails loudly at start, not halfway through a job.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from intelliperf.errors import SpecError
from intelliperf.gpu.backend import GpuBackend
from intelliperf.vendors import BUILTIN_BACKENDS, ENTRY_POINT_GROUP

__all__ = ["BUILTIN_BACKENDS", "ENTRY_POINT_GROUP", "BackendRegistrationError", "backend_class", "vendors"]


class BackendRegistrationError(RuntimeError):
    pass


def _load(target: str) -> object:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@cache
def _registry() -> dict[str, str | object]:
    """Vendor -> the in-tree backend's import path, or a plugin's loaded class (a plugin may replace an
    in-tree backend of the same vendor)."""
    found: dict[str, str | object] = dict(BUILTIN_BACKENDS)
    for point in entry_points(group=ENTRY_POINT_GROUP):
        cls = point.load()
        if not (isinstance(cls, type) and issubclass(cls, GpuBackend)):
            raise BackendRegistrationError(
                f"entry point {point.name!r} of {ENTRY_POINT_GROUP} is {cls!r}, not a GpuBackend subclass"
            )
        found[point.name] = cls
    return found


def vendors() -> list[str]:
    return list(_registry())


def backend_class(vendor: str) -> type[GpuBackend]:
    """The backend for ``vendor``; in-tree backends are imported only when asked for."""
    registry = _registry()
    if vendor not in registry:
        raise SpecError(
            f"no GPU backend for vendor {vendor!r}; installed: {', '.join(registry)}",
            hint=f"a backend is a GpuBackend subclass registered under the {ENTRY_POINT_GROUP} entry points",
        )
    entry = registry[vendor]
    cls = _load(entry) if isinstance(entry, str) else entry
    if not (isinstance(cls, type) and issubclass(cls, GpuBackend)):
        raise BackendRegistrationError(f"{entry!r} is not a GpuBackend subclass")
    return cls

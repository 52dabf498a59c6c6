"""Which GPU vendors this installation has a backend for: the in-tree ones and the plugins of the
`intelliperf.backends` entry points, by name only (nothing is imported, so the API host, which runs no GPU
code, can refuse a spec for a vendor no worker could serve). `intelliperf.gpu.registry` loads them."""

from __future__ import annotations

from importlib.metadata import entry_points

__all__ = ["BUILTIN_BACKENDS", "ENTRY_POINT_GROUP", "vendor_names", "vendor_problem"]

ENTRY_POINT_GROUP = "intelliperf.backends"
BUILTIN_BACKENDS = {
    "nvidia": "intelliperf.gpu.nvidia.backend:NvidiaBackend",
    "amd": "intelliperf.gpu.amd.backend:AmdBackend",
}


def vendor_names() -> list[str]:
    """The in-tree vendors, then each plugin's (a plugin may also replace an in-tree vendor's backend)."""
    names = list(BUILTIN_BACKENDS)
    names += [point.name for point in entry_points(group=ENTRY_POINT_GROUP) if point.name not in names]
    return names


def vendor_problem(vendor: str) -> str | None:
    """Why ``vendor`` cannot be served here (no backend of that name is installed), or None."""
    names = vendor_names()
    if vendor in names:
        return None
    return f"unknown GPU vendor {vendor!r}; the installed backends: {', '.join(names)}"

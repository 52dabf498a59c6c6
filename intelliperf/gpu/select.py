"""Pick the backend: the vendor's (intelliperf.gpu.registry), or a recorded profile."""

from __future__ import annotations

from pathlib import Path

from intelliperf.gpu.backend import GpuBackend

__all__ = ["backend_for"]


def backend_for(
    replay: Path | None = None, *, record: Path | None = None, vendor: str = "nvidia"
) -> GpuBackend:
    if replay is not None:
        from intelliperf.gpu.replay import ReplayBackend

        return ReplayBackend(replay)
    from intelliperf.gpu.registry import backend_class

    return backend_class(vendor)(record=record)

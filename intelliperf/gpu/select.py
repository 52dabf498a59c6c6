"""Pick the backend: the GPU, or a recorded profile."""

from __future__ import annotations

from pathlib import Path

from intelliperf.gpu.backend import GpuBackend

__all__ = ["backend_for"]


def backend_for(replay: Path | None = None, *, record: Path | None = None) -> GpuBackend:
    if replay is not None:
        from intelliperf.gpu.replay import ReplayBackend

        return ReplayBackend(replay)
    from intelliperf.gpu.nvidia import NvidiaBackend

    return NvidiaBackend(record=record)

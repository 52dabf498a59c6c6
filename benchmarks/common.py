"""What every GPU benchmark script needs: the device's name and the wall time of a plain run."""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

from benchmarks.gpu_record import device_name

__all__ = ["device_name", "plain_wall"]


def plain_wall(argv: list[str], cwd: Path, repeats: int = 3) -> float:
    """Median wall time of ``repeats`` runs of ``argv`` without any instrumentation."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)

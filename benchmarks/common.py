"""What every GPU benchmark script needs: the device's name and the wall time of a plain run."""

from __future__ import annotations

import statistics
import subprocess
import time
from pathlib import Path

__all__ = ["device_name", "plain_wall"]


def device_name() -> str:
    """The first GPU's name from nvidia-smi, or "unknown" without one."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return "unknown"
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def plain_wall(argv: list[str], cwd: Path, repeats: int = 3) -> float:
    """Median wall time of ``repeats`` runs of ``argv`` without any instrumentation."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)

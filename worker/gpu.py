"""The GPUs this node has, and the queues a worker for each one consumes."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

__all__ = ["GpuInfo", "detect_gpus", "queues_for"]


@dataclass(frozen=True)
class GpuInfo:
    index: int
    vendor: str
    name: str
    arch: str  # sm_90, gfx942
    memory_bytes: int


def detect_gpus() -> list[GpuInfo]:
    """NVIDIA GPUs from nvidia-smi; none when it is missing or fails."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        output = subprocess.run(
            [smi, "--query-gpu=index,name,compute_cap,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [gpu for line in output.splitlines() if (gpu := _parse(line)) is not None]


def _parse(line: str) -> GpuInfo | None:
    fields = [field.strip() for field in line.split(",")]
    if len(fields) != 4:
        return None
    index, name, capability, memory_mib = fields
    try:
        major, minor = capability.split(".")
        return GpuInfo(int(index), "nvidia", name, f"sm_{major}{minor}", int(float(memory_mib)) * 2**20)
    except ValueError:
        return None


def queues_for(gpu: GpuInfo | None) -> list[str]:
    """A GPU's own queue (gpu.nvidia.sm90) and its vendor's 'any' queue; without a GPU, the 'any' one."""
    if gpu is None:
        return ["gpu.nvidia.any"]
    return [f"gpu.{gpu.vendor}.{gpu.arch.replace('_', '')}", f"gpu.{gpu.vendor}.any"]

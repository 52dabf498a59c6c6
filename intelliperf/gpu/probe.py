"""The GPUs this machine has, of every vendor, each numbered as its vendor's tool numbers it."""

from __future__ import annotations

from collections.abc import Callable

from intelliperf.gpu.amd.smi import scan_amd
from intelliperf.gpu.nvidia.smi import scan_nvidia
from intelliperf.gpu.smi import GpuInfo, Scan, Vendor

__all__ = ["LABELS", "SCANS", "GpuInfo", "Vendor", "probe_gpus"]

SCANS: dict[Vendor, Callable[[], Scan]] = {"nvidia": scan_nvidia, "amd": scan_amd}
"""Each vendor's probe: its GPUs, or why it found none (the errors of query_device say so)."""
LABELS: dict[Vendor, str] = {"nvidia": "NVIDIA", "amd": "AMD"}


def probe_gpus() -> list[GpuInfo]:
    """Every vendor's GPUs, NVIDIA's first; none when no vendor's tool is there or works."""
    return [gpu for scan in SCANS.values() for gpu in scan().gpus]

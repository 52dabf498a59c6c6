"""The GPUs this machine has, of every vendor, each numbered as its vendor's tool numbers it."""

from __future__ import annotations

from collections.abc import Callable

from intelliperf.gpu.amd_smi import probe_amd, scan_amd
from intelliperf.gpu.nvidia_smi import probe_nvidia, scan_nvidia
from intelliperf.gpu.smi import GpuInfo, Scan, Vendor

__all__ = ["LABELS", "PROBES", "SCANS", "GpuInfo", "Vendor", "probe_gpus"]

PROBES: dict[Vendor, Callable[[], list[GpuInfo]]] = {"nvidia": probe_nvidia, "amd": probe_amd}
# the same probes with the reason they found nothing, for the errors of query_device
SCANS: dict[Vendor, Callable[[], Scan]] = {"nvidia": scan_nvidia, "amd": scan_amd}
LABELS: dict[Vendor, str] = {"nvidia": "NVIDIA", "amd": "AMD"}


def probe_gpus() -> list[GpuInfo]:
    """Every vendor's GPUs, NVIDIA's first; none when no vendor's tool is there or works."""
    return [gpu for probe in PROBES.values() for gpu in probe()]

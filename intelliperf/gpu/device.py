"""Find the GPU and the tools the passes need, with a clear error when one is missing."""

from __future__ import annotations

import shutil

from intelliperf.contract import DeviceInfo
from intelliperf.errors import NoGpuError, ToolMissingError
from intelliperf.gpu.probe import LABELS, SCANS, Vendor
from intelliperf.gpu.smi import Scan

__all__ = ["query_device", "require_tool"]


def require_tool(name: str, *, purpose: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolMissingError(f"{name} was not found on PATH; it is needed for {purpose}", hint=hint)
    return path


def query_device(index: int = 0, vendor: Vendor | None = None) -> DeviceInfo:
    """The GPU with this index (as its vendor's tool numbers it) of ``vendor``, else of the first vendor
    that has one."""
    vendors: list[Vendor] = [vendor] if vendor else list(SCANS)
    reasons: list[str] = []
    tails: list[str] = []
    for name in vendors:
        scan = SCANS[name]()
        gpu = next((gpu for gpu in scan.gpus if gpu.index == index), None)
        if gpu is not None:
            return gpu.device_info()
        reasons.append(_reason(name, index, scan))
        tails += [scan.log_tail] if scan.log_tail else []
    labels = " or ".join(LABELS[name] for name in vendors)
    message = (
        reasons[0]
        if len(reasons) == 1
        else f"no {labels} GPU found:\n" + "\n".join(f"  {reason}" for reason in reasons)
    )
    hint = f"run on a machine with an {labels} GPU and its driver, or use a recorded profile (--replay)"
    raise NoGpuError(message, hint=hint, log_tail="\n".join(tails) or None)


def _reason(vendor: Vendor, index: int, scan: Scan) -> str:
    if scan.gpus:
        found = ", ".join(str(gpu.index) for gpu in scan.gpus)
        return f"no {LABELS[vendor]} GPU with index {index} (found {found})"
    return scan.problem or f"no {LABELS[vendor]} GPU found"

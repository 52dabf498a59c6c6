"""Find the NVIDIA GPU and the tools the passes need, with a clear error when one is missing."""

from __future__ import annotations

import shutil
import subprocess

from intelliperf.contract import DeviceInfo
from intelliperf.errors import NoGpuError, ToolMissingError, tail

__all__ = ["query_device", "require_tool"]

NVIDIA_SMI_FIELDS = "name,compute_cap,memory.total,driver_version"


def require_tool(name: str, *, purpose: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolMissingError(f"{name} was not found on PATH; it is needed for {purpose}", hint=hint)
    return path


def parse_nvidia_smi(text: str) -> DeviceInfo:
    """Parse `nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits`."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise NoGpuError("nvidia-smi lists no GPU")
    fields = [field.strip() for field in lines[0].split(",")]
    if len(fields) < 4:
        raise NoGpuError(f"unexpected nvidia-smi output: {lines[0]!r}")
    name, capability, memory_mib, driver = fields[:4]
    major, _, minor = capability.partition(".")
    memory = int(float(memory_mib) * 1024 * 1024) if memory_mib.replace(".", "").isdigit() else None
    return DeviceInfo(name=name, arch=f"sm_{major}{minor}", memory_bytes=memory, driver=driver)


def query_device(index: int = 0) -> DeviceInfo:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise NoGpuError(
            "no NVIDIA GPU: nvidia-smi is not installed",
            hint="run on a machine with an NVIDIA GPU and driver, or use a recorded profile (--replay)",
        )
    try:
        proc = subprocess.run(
            [smi, f"--id={index}", f"--query-gpu={NVIDIA_SMI_FIELDS}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired as exc:
        raise NoGpuError("nvidia-smi did not answer within 30 s") from exc
    if proc.returncode != 0:
        raise NoGpuError("nvidia-smi failed: no usable NVIDIA GPU", log_tail=tail(proc.stdout + proc.stderr))
    return parse_nvidia_smi(proc.stdout)

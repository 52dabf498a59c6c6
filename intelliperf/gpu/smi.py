"""What the vendors' SMI probes share: the GpuInfo they list, the Scan one tool's run gives, and running
a tool. Kept apart from probe.py so that the vendor modules and the probe import it without a cycle."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Literal

from intelliperf.contract import DeviceInfo
from intelliperf.errors import tail

__all__ = ["TIMEOUT_S", "GpuInfo", "Scan", "Vendor", "first_json", "run_tool"]

Vendor = Literal["nvidia", "amd"]

TIMEOUT_S = 30
WARP_SIZE: dict[Vendor, int] = {"nvidia": 32, "amd": 64}


@dataclass(frozen=True)
class GpuInfo:
    index: int  # as the vendor's tool numbers it
    vendor: Vendor
    name: str
    arch: str  # sm_90, gfx942
    memory_bytes: int | None
    driver: str | None = None
    compute_units: int | None = None
    """SMs (NVIDIA) or CUs (AMD), where the tool says: the AMD counter table needs it."""

    def device_info(self) -> DeviceInfo:
        return DeviceInfo(
            vendor=self.vendor,
            name=self.name,
            arch=self.arch,
            memory_bytes=self.memory_bytes,
            driver=self.driver,
            sm_count=self.compute_units,
            warp_size=WARP_SIZE[self.vendor],
        )


@dataclass(frozen=True)
class Scan:
    """The GPUs one vendor's tool lists and, when it lists none (or left some out), why: the message a
    NoGpuError gives, with the tool's last output."""

    gpus: tuple[GpuInfo, ...] = ()
    problem: str | None = None
    log_tail: str | None = None


def run_tool(name: str, *args: str, label: str) -> str | Scan | None:
    """The tool's stdout; None when it is not on PATH; an empty Scan saying why when it failed."""
    path = shutil.which(name)
    if path is None:
        return None
    try:
        proc = subprocess.run(
            [path, *args], capture_output=True, text=True, errors="replace", timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return Scan(problem=f"{name} did not answer within {TIMEOUT_S} s")
    except OSError as exc:
        return Scan(problem=f"{name} could not be run: {exc}")
    if proc.returncode != 0:
        return Scan(problem=f"{name} failed: no usable {label} GPU", log_tail=tail(proc.stdout + proc.stderr))
    return proc.stdout


def first_json(text: str) -> Any:
    """The first JSON value in a tool's output (a warning line may come before it); None if none."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char in "[{":
            try:
                return decoder.raw_decode(text, start)[0]
            except ValueError:
                continue
    return None

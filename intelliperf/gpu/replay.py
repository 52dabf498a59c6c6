"""A backend that answers from a profile recorded on a GPU machine (see NvidiaBackend(record=...)).

Two recordings are read: the CUPTI counter pass's (``counters-<n>.jsonl`` and each cubin's disassembly
``sass-<crc>.txt``, recorded since 2026-11-27) and, from before, Nsight Compute's pages (``raw.csv``,
``source_cuda_sass.csv`` and, where a kernel had no line info, ``source_sass.csv``). A folder with counters
files is read as the former.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

from intelliperf.contract import DeviceInfo, IntraKernelProfile, RankedKernel
from intelliperf.contract.profile import KernelProfile, Quantity
from intelliperf.errors import ProfileError
from intelliperf.gpu.backend import GpuBackend, TimingPass
from intelliperf.gpu.nvidia.cupti_counters import CounterRecords, counter_notes, parse_counters
from intelliperf.gpu.nvidia.ncu import LOG_FILE, RAW_PAGE, SASS_PAGE
from intelliperf.gpu.nvidia.profiles import (
    build_profiles,
    device_from_counters,
    device_from_raw,
    profiles_from_counters,
)
from intelliperf.gpu.nvidia.sass_listing import parse_listing
from intelliperf.gpu.proton import HATCHET, META, read_profile
from profiler.trace import read_trace, summarize

__all__ = ["ReplayBackend"]

TRACE = "trace.jsonl"
NCU_PAGES = (RAW_PAGE, LOG_FILE)
_LISTING = re.compile(r"^sass-(\d+)\.txt$")


class ReplayBackend(GpuBackend):
    """Serves a recorded folder: trace.jsonl and device.json with the CUPTI counters or Nsight Compute's
    pages (see the module doc).

    Source files named in the recording are looked up under the project directory the engine
    passes as `cwd`, so localization shows the project's own code.
    """

    recorded = True

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.counters_files = sorted(folder.glob("counters-*.jsonl"), key=_number)
        pages = [] if self.counters_files else list(NCU_PAGES)
        has_trace = (folder / TRACE).is_file()
        legacy = bool(pages) and all((folder / name).is_file() for name in pages)
        if not has_trace or not (self.counters_files or legacy):
            missing = [TRACE] if not has_trace else []
            if not (self.counters_files or legacy):
                missing.append("counters-*.jsonl")
            raise ProfileError(
                f"{folder} is not a recorded profile: it has no {' and no '.join(missing)} (a recording "
                "holds the timing pass's trace.jsonl and the counter pass's counters-*.jsonl)"
            )
        self.profiler = "CUPTI" if self.counters_files else "Nsight Compute"  # type: ignore[misc]
        self._records: CounterRecords | None = None
        self._notes: list[str] = []

    def _text(self, name: str) -> str:
        return (self.folder / name).read_text()

    def _counters(self) -> CounterRecords:
        if self._records is None:
            self._records = parse_counters([path.read_text() for path in self.counters_files])
        return self._records

    def device(self) -> DeviceInfo:
        device_file = self.folder / "device.json"
        base = (
            DeviceInfo.model_validate(json.loads(device_file.read_text()))
            if device_file.is_file()
            else DeviceInfo(name="recorded", arch="sm_90")
        )
        if self.counters_files:
            return device_from_counters(self._counters(), base)
        return device_from_raw(self._text(RAW_PAGE), base)

    def take_notes(self) -> list[str]:
        notes, self._notes = self._notes, []
        return notes

    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass:
        stats = summarize(read_trace(self.folder / TRACE))
        return TimingPass(kernels=stats, wall_s=0.0)

    def collect(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        kernels: Sequence[RankedKernel],
        metrics: Sequence[Quantity],
        timeout_s: float,
    ) -> dict[str, KernelProfile]:
        arch = self.device().arch
        if not self.counters_files:
            return build_profiles(
                self._text(RAW_PAGE),
                self._text(LOG_FILE),
                self._text(SASS_PAGE) if (self.folder / SASS_PAGE).is_file() else None,
                kernels,
                arch=arch,
                resolve=cwd,
            )
        records = self._counters()
        listings = {
            int(match.group(1)): parse_listing(path.read_text())
            for path in self.folder.glob("sass-*.txt")
            if (match := _LISTING.match(path.name)) is not None
        }
        self._notes = counter_notes(records, kernels)
        return profiles_from_counters(records, listings, kernels, arch=arch, resolve=cwd)

    def intra_kernel(
        self, argv: Sequence[str], *, cwd: Path, kernel: RankedKernel, timeout_s: float
    ) -> IntraKernelProfile:
        hatchet, meta = self.folder / HATCHET, self.folder / META
        if not (hatchet.is_file() and meta.is_file()):
            raise ProfileError(f"{self.folder} holds no Proton profile ({HATCHET}, {META})")
        profile = read_profile(hatchet, meta, cwd)
        if profile.kernel != kernel.name:
            raise ProfileError(f"the recorded Proton profile is of {profile.kernel}, not {kernel.name}")
        return profile


def _number(path: Path) -> int:
    digits = re.findall(r"\d+", path.stem)
    return int(digits[-1]) if digits else 0

"""A backend that answers from a profile recorded on a GPU machine (see NvidiaBackend(record=...)).

One recording is read: the timing pass's ``trace.jsonl`` with the CUPTI counter pass's counters files
(``counters-<n>.jsonl``) and each cubin's disassembly (``sass-<crc>.txt``). Recordings made before
2026-11-27 with Nsight Compute's pages instead (``raw.csv``, ``source_cuda_sass.csv``) are refused; their
reader is the reference in benchmarks/ncu.
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
from intelliperf.gpu.nvidia.profiles import device_from_counters, profiles_from_counters
from intelliperf.gpu.nvidia.sass_listing import parse_listing
from intelliperf.gpu.proton import HATCHET, META, read_profile
from profiler.trace import read_trace, summarize

__all__ = ["ReplayBackend"]

TRACE = "trace.jsonl"
COUNTERS = "counters-*.jsonl"
OLD_PAGES = ("raw.csv", "source_cuda_sass.csv")
"""Nsight Compute's pages, which recordings made before 2026-11-27 hold instead of counters files."""
_LISTING = re.compile(r"^sass-(\d+)\.txt$")


class ReplayBackend(GpuBackend):
    """Serves a recorded folder: trace.jsonl and device.json with the CUPTI counters (see the module doc).

    Source files named in the recording are looked up under the project directory the engine
    passes as `cwd`, so localization shows the project's own code.
    """

    recorded = True

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.counters_files = sorted(folder.glob(COUNTERS), key=_number)
        missing = [TRACE] if not (folder / TRACE).is_file() else []
        if not self.counters_files:
            missing.append(COUNTERS)
        if missing:
            raise ProfileError(_not_a_recording(folder, missing))
        self._records: CounterRecords | None = None
        self._notes: list[str] = []

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
        return device_from_counters(self._counters(), base)

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


def _not_a_recording(folder: Path, missing: list[str]) -> str:
    """Why ``folder`` is refused: what it lacks and, without counters files, that it is no CUPTI recording
    (naming Nsight Compute's pages where it holds them)."""
    reason = f"{folder} is not a recorded profile: it has no {' and no '.join(missing)}"
    holds = f"a recording holds the timing pass's {TRACE} and the CUPTI counter pass's {COUNTERS}"
    if COUNTERS not in missing:
        return f"{reason} ({holds})"
    old_pages = [name for name in OLD_PAGES if (folder / name).is_file()]
    if old_pages:
        return (
            f"{reason}, so it is not a CUPTI recording: it holds Nsight Compute's {' and '.join(old_pages)}, "
            f"and Nsight Compute recordings are no longer read ({holds})"
        )
    return f"{reason}, so it is not a CUPTI recording ({holds}; Nsight Compute recordings are no longer read)"


def _number(path: Path) -> int:
    digits = re.findall(r"\d+", path.stem)
    return int(digits[-1]) if digits else 0

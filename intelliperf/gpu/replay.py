"""A backend that answers from a profile recorded on a GPU machine (see NvidiaBackend(record=...))."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from accordo.trace import read_trace, summarize
from formulas.base import KernelProfile
from formulas.quantities import Quantity
from intelliperf.contract import DeviceInfo, IntraKernelProfile, RankedKernel
from intelliperf.errors import ProfileError
from intelliperf.gpu.backend import GpuBackend, TimingPass
from intelliperf.gpu.ncu import LOG_FILE, RAW_PAGE, SASS_PAGE
from intelliperf.gpu.profiles import build_profiles, device_from_raw
from intelliperf.gpu.proton import HATCHET, META, read_profile

__all__ = ["ReplayBackend"]

REQUIRED = ("trace.jsonl", RAW_PAGE, LOG_FILE)


class ReplayBackend(GpuBackend):
    """Serves a recorded folder: trace.jsonl, raw.csv, source_cuda_sass.csv, device.json, and source_sass.csv
    where the recording has one.

    Source files named in the recording are looked up under the project directory the engine
    passes as `cwd`, so localization shows the project's own code.
    """

    recorded = True

    def __init__(self, folder: Path) -> None:
        missing = [name for name in REQUIRED if not (folder / name).is_file()]
        if missing:
            raise ProfileError(f"{folder} is not a recorded profile: missing {', '.join(missing)}")
        self.folder = folder

    def _text(self, name: str) -> str:
        return (self.folder / name).read_text()

    def device(self) -> DeviceInfo:
        device_file = self.folder / "device.json"
        base = (
            DeviceInfo.model_validate(json.loads(device_file.read_text()))
            if device_file.is_file()
            else DeviceInfo(name="recorded", arch="sm_90")
        )
        return device_from_raw(self._text(RAW_PAGE), base)

    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass:
        stats = summarize(read_trace(self.folder / "trace.jsonl"))
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
        return build_profiles(
            self._text(RAW_PAGE),
            self._text(LOG_FILE),
            self._text(SASS_PAGE) if (self.folder / SASS_PAGE).is_file() else None,
            kernels,
            arch=self.device().arch,
            resolve=cwd,
        )

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

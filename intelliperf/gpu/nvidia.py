"""The NVIDIA backend: Accordo's CUPTI tracer for the timing pass, Nsight Compute for the counters."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from accordo.build import cached_library, native_library
from accordo.trace import KernelLaunch, run_traced
from formulas.base import KernelProfile
from formulas.quantities import Quantity
from intelliperf.contract import DeviceInfo, IntraKernelProfile, RankedKernel
from intelliperf.gpu.backend import GpuBackend, TimingPass
from intelliperf.gpu.device import query_device, require_tool
from intelliperf.gpu.ncu import EXPORTS, LOG_FILE, RAW_PAGE, SASS_PAGE, export_page, read_raw_page, run_ncu
from intelliperf.gpu.ncu_source import kernels_without_line_info
from intelliperf.gpu.nvidia_metrics import ncu_metrics
from intelliperf.gpu.profiles import DEVICE_METRICS, build_profiles, device_from_raw
from intelliperf.gpu.proton import run_regions
from intelliperf.settings import Settings, get_settings

__all__ = ["NvidiaBackend", "write_trace"]

NCU_HINT = "install Nsight Compute (it ships with the CUDA toolkit) or set INTELLIPERF_NCU to its path"


def write_trace(launches: Sequence[KernelLaunch], path: Path) -> None:
    """Keep a timing pass in Accordo's trace format (the file a ReplayBackend reads)."""
    lines = [json.dumps({"accordo": "trace", "version": 1, "pid": 0})]
    lines += [json.dumps(asdict(launch)) for launch in launches]
    path.write_text("\n".join(lines) + "\n")


class NvidiaBackend(GpuBackend):
    """`record` keeps every export (trace, raw, source pages) in that folder for replay and fixtures."""

    def __init__(self, settings: Settings | None = None, *, record: Path | None = None) -> None:
        self.settings = settings or get_settings()
        self.record = record
        self._device: DeviceInfo | None = None

    def device(self) -> DeviceInfo:
        if self._device is None:
            self._device = query_device(vendor="nvidia")
        return self._device

    def setup_needed(self) -> str | None:
        if cached_library() is not None:
            return None
        return (
            "building Accordo's CUPTI library, once per version and toolchain "
            "(`intelliperf prepare` builds it ahead)"
        )

    def setup(self) -> None:
        native_library()

    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass:
        run = run_traced(list(argv), cwd=cwd, timeout_s=timeout_s)
        if self.record is not None:
            self.record.mkdir(parents=True, exist_ok=True)
            write_trace(run.launches, self.record / "trace.jsonl")
        return TimingPass(kernels=run.stats, wall_s=run.wall_s)

    def collect(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        kernels: Sequence[RankedKernel],
        metrics: Sequence[Quantity],
        timeout_s: float,
    ) -> dict[str, KernelProfile]:
        ncu = require_tool(self.settings.ncu, purpose="the counter pass", hint=NCU_HINT)
        metric_names = ncu_metrics(metrics, self.device().arch)
        with tempfile.TemporaryDirectory(prefix="intelliperf-ncu-") as tmp:
            run = run_ncu(
                ncu,
                argv,
                cwd=cwd,
                kernel_names=[k.name for k in kernels],
                metrics=metric_names,
                workdir=Path(tmp),
                timeout_s=timeout_s,
            )
            # The SASS page only where the source page leaves kernels out (built without -lineinfo).
            timeout = self.settings.export_timeout_s
            with ThreadPoolExecutor(max_workers=2) as pool:
                futures = {
                    RAW_PAGE: pool.submit(
                        read_raw_page,
                        ncu,
                        run.report,
                        metrics=[*metric_names, *DEVICE_METRICS],
                        timeout_s=timeout,
                    )
                }
                if kernels_without_line_info(run.log):
                    futures[SASS_PAGE] = pool.submit(
                        export_page, ncu, run.report, *EXPORTS[SASS_PAGE], timeout_s=timeout
                    )
                texts = {LOG_FILE: run.log, **{name: future.result() for name, future in futures.items()}}
        if self.record is not None:
            self.record.mkdir(parents=True, exist_ok=True)
            for name in (LOG_FILE, *EXPORTS):
                path = self.record / name
                if name in texts:
                    path.write_text(texts[name])
                else:
                    path.unlink(missing_ok=True)  # a stale page from an earlier recording would be read
        self._device = device_from_raw(texts[RAW_PAGE], self.device())
        return build_profiles(
            texts[RAW_PAGE],
            texts[LOG_FILE],
            texts.get(SASS_PAGE),
            kernels,
            arch=self._device.arch,
            resolve=None,
        )

    def intra_kernel(
        self, argv: Sequence[str], *, cwd: Path, kernel: RankedKernel, timeout_s: float
    ) -> IntraKernelProfile:
        return run_regions(argv, cwd=cwd, kernel=kernel.name, timeout_s=timeout_s, record=self.record)

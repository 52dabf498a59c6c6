"""The AMD backend: rocprofv3's kernel trace for the timing pass, its counters (--pmc) for the formulas'
quantities (amd_counters). NOT YET RUN ON AMD HARDWARE: built and tested against rocprofv3's documented
output formats only (tests/fixtures/amd).

Accordo captures CUDA launches only, so on AMD a rewrite is judged by the project's own tests
(--unittest_command) until an HSA capture library exists; the engine refuses an AMD optimization without
one before any work starts (engine.job.check_optimizable). Counters are per kernel, not per instruction:
diagnoses on AMD name the kernel and its source file, not lines.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

from intelliperf.contract import DeviceInfo, RankedKernel
from intelliperf.contract.profile import KernelProfile, Quantity
from intelliperf.errors import ProfileError
from intelliperf.gpu.amd.counters import counters_for, kernel_quantities, launch_quantities, supported
from intelliperf.gpu.amd.rocprof import KernelResources, collect_counters, trace_kernels
from intelliperf.gpu.backend import GpuBackend, TimingPass
from intelliperf.gpu.device import query_device, require_tool
from intelliperf.settings import Settings, get_settings

__all__ = ["AmdBackend"]

ROCPROF_HINT = "install ROCm's rocprofiler-sdk (rocprofv3) or set INTELLIPERF_ROCPROFV3 to its path"


class AmdBackend(GpuBackend):
    """`record` keeps the rocprofv3 CSV files of every pass in that folder."""

    profiler: ClassVar[str] = "rocprofv3"
    tracer: ClassVar[str] = "rocprofv3 --kernel-trace"
    source_lines: ClassVar[bool] = False
    captures_kernels: ClassVar[bool] = False

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        record: Path | None = None,
        device: DeviceInfo | None = None,
    ) -> None:
        """``device``: the GPU as already probed (the probe is skipped)."""
        self.settings = settings or get_settings()
        self.record = record
        self._device = device
        self._resources: dict[str, KernelResources] = {}

    def device(self) -> DeviceInfo:
        if self._device is None:
            self._device = query_device(vendor="amd")
        return self._device

    def _rocprof(self, purpose: str) -> str:
        return require_tool(self.settings.rocprofv3, purpose=purpose, hint=ROCPROF_HINT)

    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass:
        rocprof = self._rocprof("the timing pass")
        with tempfile.TemporaryDirectory(prefix="intelliperf-rocprof-") as tmp:
            trace = trace_kernels(rocprof, argv, cwd=cwd, workdir=Path(tmp), timeout_s=timeout_s)
            self._keep(Path(tmp), "trace")
        self._resources = dict(trace.resources)
        return TimingPass(kernels=trace.stats, wall_s=trace.wall_s)

    def collect(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        kernels: Sequence[RankedKernel],
        metrics: Sequence[Quantity],
        timeout_s: float,
    ) -> dict[str, KernelProfile]:
        device = self.device()
        if not supported(device.arch):
            raise ProfileError(
                f"the AMD backend has no counter table for {device.arch}",
                hint="its table (intelliperf/gpu/amd/counters.py) covers gfx90a and gfx942",
            )
        groups = counters_for(metrics)
        counters: dict[str, dict[str, float]] = {}
        if groups:
            rocprof = self._rocprof("the counter pass")
            with tempfile.TemporaryDirectory(prefix="intelliperf-rocprof-") as tmp:
                counters = collect_counters(
                    rocprof,
                    argv,
                    cwd=cwd,
                    workdir=Path(tmp),
                    kernel_names=[k.name for k in kernels],
                    counter_groups=groups,
                    timeout_s=timeout_s,
                )
                self._keep(Path(tmp), "counters")
        return {
            kernel.name: self._profile(kernel, counters.get(kernel.name, {}), device)
            for kernel in kernels
            if kernel.name in counters or not groups
        }

    def _profile(self, kernel: RankedKernel, counters: dict[str, float], device: DeviceInfo) -> KernelProfile:
        quantities = kernel_quantities(counters, device)
        quantities[Quantity.KERNEL_TIME_NS.value] = kernel.median_ns
        resources = self._resources.get(kernel.name)
        if resources is not None:
            quantities.update(launch_quantities(resources, device))
        return KernelProfile(
            name=kernel.name,
            demangled=kernel.demangled,
            duration_ns=kernel.median_ns,
            metrics=quantities,
            launches=kernel.launches,
            total_ns=kernel.total_ns,
            arch=device.arch,
            source_page=False,
        )

    def _keep(self, folder: Path, name: str) -> None:
        if self.record is None:
            return
        target = self.record / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder, target)

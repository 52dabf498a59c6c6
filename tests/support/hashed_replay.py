"""transpose_bank's recording (H200) replayed with a code hash per kernel, as the tracer gives one today
(the recording predates it), counting counter passes: the engine's reuse of counters, without a GPU."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from intelliperf.contract import Application, DeviceInfo, JobSpec, RankedKernel, Report
from intelliperf.contract.profile import KernelProfile, Quantity
from intelliperf.engine.counter_store import CounterStore
from intelliperf.engine.diagnose import run_diagnosis
from intelliperf.gpu.backend import TimingPass
from intelliperf.gpu.replay import ReplayBackend
from tests.recorded import RECORDED

KERNEL = "_Z15transpose_tiledPKfPfii"
ORIGINAL = RECORDED / "transpose_bank" / "original"


class Hashed(ReplayBackend):
    """The recording with code hashes given per kernel (and a device name), counting counter passes."""

    def __init__(self, codes: Mapping[str, str], device: str | None = None, shape: str | None = None) -> None:
        super().__init__(ORIGINAL)
        self.codes, self.device_name, self.shape = codes, device, shape
        self.collected: list[list[str]] = []

    def device(self) -> DeviceInfo:
        base = super().device()
        return base if self.device_name is None else base.model_copy(update={"name": self.device_name})

    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass:
        timing = super().time_kernels(argv, cwd=cwd, timeout_s=timeout_s)
        kernels = [
            dataclasses.replace(k, code_hash=self.codes.get(k.name), shape_hash=self.shape or k.shape_hash)
            for k in timing.kernels
        ]
        return TimingPass(kernels=kernels, wall_s=timing.wall_s)

    def collect(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        kernels: Sequence[RankedKernel],
        metrics: Sequence[Quantity],
        timeout_s: float,
    ) -> dict[str, KernelProfile]:
        self.collected.append([k.name for k in kernels])
        return super().collect(argv, cwd=cwd, kernels=kernels, metrics=metrics, timeout_s=timeout_s)


def diagnosed(backend: Hashed, project: Path, store: CounterStore | None) -> Report:
    spec = JobSpec(applications=[Application(command=["./bin/transpose"])], formula="diagnoseOnly", top_n=1)
    return run_diagnosis(spec, backend=backend, project=project, counter_store=store)

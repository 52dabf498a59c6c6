"""The seam between the engine and the hardware.

`NvidiaBackend` runs the timing pass (Accordo's CUPTI tracer) and the counter pass (Accordo's CUPTI counters).
`ReplayBackend` serves the same answers from a folder recorded on a GPU machine, so the engine, the
formulas and the service can run end to end on a machine without a GPU.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from intelliperf.contract import DeviceInfo, IntraKernelProfile, RankedKernel
from intelliperf.contract.kernel_names import is_library_kernel
from intelliperf.contract.profile import KernelProfile, KernelStats, Quantity
from intelliperf.errors import ProfileError

__all__ = ["GpuBackend", "TimingPass", "rank_kernels"]


@dataclass(frozen=True)
class TimingPass:
    kernels: Sequence[KernelStats]
    wall_s: float


def rank_kernels(kernels: Sequence[KernelStats]) -> list[RankedKernel]:
    total = sum(k.total_ns for k in kernels) or 1
    ordered = sorted(kernels, key=lambda k: k.total_ns, reverse=True)
    return [
        RankedKernel(
            rank=i,
            name=k.name,
            demangled=k.demangled,
            launches=k.launches,
            total_ns=k.total_ns,
            mean_ns=k.mean_ns,
            median_ns=k.median_ns,
            share=round(k.total_ns / total, 6),
            library=is_library_kernel(k.demangled),
            code_hash=k.code_hash,
            shape_hash=k.shape_hash,
            launch_ns=list(k.launch_ns),
        )
        for i, k in enumerate(ordered, start=1)
    ]


class GpuBackend(ABC):
    """One vendor's GPUs: its timing pass, its counter pass (the quantities of intelliperf.contract.profile
    measured with its own profiler, through its own table) and what can judge a rewrite on it. Backends are
    found by vendor in intelliperf.gpu.registry and are built as ``cls(record=folder_or_None)``."""

    recorded: ClassVar[bool] = False
    """Whether the passes read a recording instead of running (progress then says what is read)."""
    profiler: ClassVar[str] = "CUPTI"
    """The counter pass's tool, as progress and errors name it."""
    tracer: ClassVar[str] = "CUPTI"
    """The timing pass's tool, as progress names it."""
    source_lines: ClassVar[bool] = True
    """Whether the counter pass attributes counters to source lines (else diagnoses name kernels only)."""
    captures_kernels: ClassVar[bool] = True
    """Whether Accordo can capture and replay this backend's kernel launches (its default judge); where
    not, a rewrite is judged by the project's own tests (--unittest_command)."""

    @abstractmethod
    def device(self) -> DeviceInfo: ...

    def setup_needed(self) -> str | None:
        """What must be built before the first pass can run, in words for the progress display; None when
        nothing is (built ahead by `intelliperf prepare`, or on an earlier run)."""
        return None

    def setup(self) -> None:  # noqa: B027 (nothing to build unless a backend says so)
        """Build what setup_needed names, so that no measured pass includes it."""

    def take_notes(self) -> list[str]:
        """What the last counter pass could not count, for the report's warnings (each once)."""
        return []

    @abstractmethod
    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass: ...

    @abstractmethod
    def collect(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        kernels: Sequence[RankedKernel],
        metrics: Sequence[Quantity],
        timeout_s: float,
    ) -> dict[str, KernelProfile]:
        """Counters and per-source-line counters for each given kernel, keyed by its mangled name."""

    def intra_kernel(
        self, argv: Sequence[str], *, cwd: Path, kernel: RankedKernel, timeout_s: float
    ) -> IntraKernelProfile:
        """Cycles per region of one Triton kernel. ProfileError where the backend cannot tell."""
        raise ProfileError(f"{type(self).__name__} has no intra-kernel profiler")

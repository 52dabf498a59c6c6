"""The NVIDIA backend: Accordo's CUPTI tracer for the timing pass, Accordo's CUPTI counter pass
(`cupti_counters`) for the counters, Proton for a Triton kernel's regions."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import ClassVar

from intelliperf.contract import DeviceInfo, IntraKernelProfile, RankedKernel
from intelliperf.contract.profile import KernelProfile, Quantity
from intelliperf.errors import ProfileError, ToolMissingError
from intelliperf.gpu.backend import GpuBackend, TimingPass
from intelliperf.gpu.device import query_device
from intelliperf.gpu.nvidia.cupti_counters import (
    counter_notes,
    counter_pass_lock,
    environment_problem,
    parse_counters,
    run_counters,
)
from intelliperf.gpu.nvidia.metrics import SASS_METRICS, range_profiler_metrics
from intelliperf.gpu.nvidia.profiles import device_from_counters, profiles_from_counters
from intelliperf.gpu.nvidia.sass_listing import disassemble, parse_listing
from intelliperf.gpu.proton import run_regions
from intelliperf.settings import Settings, get_settings
from profiler.build import cached_library, native_library
from profiler.trace import KernelLaunch, run_traced

__all__ = ["COUNTERS_FILE", "LISTING_FILE", "NvidiaBackend", "write_trace"]

COUNTERS_FILE = "counters-{index}.jsonl"
"""A recording's counters files, one per process and run, numbered in the order they were written."""
LISTING_FILE = "sass-{cubin}.txt"
"""A recording's disassembly of one cubin (by its CRC)."""
TRACE_SAMPLE_FIRST = 1000
TRACE_SAMPLE_EVERY = 64
"""The timing pass records each kernel's first TRACE_SAMPLE_FIRST launches and every TRACE_SAMPLE_EVERY-th
after, and counts the others (profiler/native/launch_sampler.h): CUPTI's kernel records cost about 2 us a
launch, which a program of tens of thousands of launches would pay on every one. A recording (``record``)
keeps every launch."""

PERMISSION_HINT = (
    "hardware counters are admin-only on this host: run as root, or let every user profile "
    "(options nvidia NVreg_RestrictProfilingToAdminUsers=0, then reload the driver)"
)


def write_trace(launches: Sequence[KernelLaunch], path: Path) -> None:
    """Keep a timing pass in Accordo's trace format (the file a ReplayBackend reads)."""
    lines = [json.dumps({"accordo": "trace", "version": 1, "pid": 0})]
    lines += [json.dumps(asdict(launch)) for launch in launches]
    path.write_text("\n".join(lines) + "\n")


class NvidiaBackend(GpuBackend):
    """`record` keeps what each pass read (trace, counters files, disassembly) in that folder for replay and
    fixtures."""

    profiler: ClassVar[str] = "CUPTI"

    def __init__(self, settings: Settings | None = None, *, record: Path | None = None) -> None:
        self.settings = settings or get_settings()
        self.record = record
        self._device: DeviceInfo | None = None
        self._notes: list[str] = []

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

    def take_notes(self) -> list[str]:
        notes, self._notes = self._notes, []
        return notes

    def time_kernels(self, argv: Sequence[str], *, cwd: Path, timeout_s: float) -> TimingPass:
        sampling = {"sample_first": str(TRACE_SAMPLE_FIRST), "sample_every": str(TRACE_SAMPLE_EVERY)}
        run = run_traced(list(argv), cwd=cwd, timeout_s=timeout_s, settings=None if self.record else sampling)
        sampled = sorted(
            {name for t in run.tables for name, n in zip(t.names, t.unrecorded, strict=False) if n}
        )
        if sampled:
            self._notes.append(
                f"{len(sampled)} kernel(s) launched more than {TRACE_SAMPLE_FIRST} times: after that every "
                f"{TRACE_SAMPLE_EVERY}th launch was timed and the others counted, their time estimated at "
                "the timed launches' mean"
            )
        if self.record is not None:
            self.record.mkdir(parents=True, exist_ok=True)
            write_trace(run.launches, self.record / "trace.jsonl")
        return TimingPass(kernels=run.stats, wall_s=run.wall_s)

    def nvdisasm(self) -> str:
        """The CUDA toolkit's disassembler: in the toolkit named by INTELLIPERF_CUDA_HOME, else on PATH."""
        bundled = self.settings.cuda_home / "bin" / "nvdisasm"
        found = str(bundled) if bundled.is_file() else shutil.which("nvdisasm")
        if found is None:
            raise ToolMissingError(
                f"nvdisasm was found neither in {bundled.parent} nor on PATH; the counter pass needs it to "
                "read the kernels' machine code and source lines",
                hint="install the CUDA toolkit or set INTELLIPERF_CUDA_HOME to it",
            )
        return found

    def collect(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        kernels: Sequence[RankedKernel],
        metrics: Sequence[Quantity],
        timeout_s: float,
    ) -> dict[str, KernelProfile]:
        nvdisasm = self.nvdisasm()
        arch = self.device().arch
        names = [k.name for k in kernels]
        with tempfile.TemporaryDirectory(prefix="intelliperf-counters-") as tmp, counter_pass_lock():
            cubins = Path(tmp)
            texts = run_counters(
                argv,
                cwd=cwd,
                kernels=names,
                metrics=range_profiler_metrics(metrics, arch),
                sass_metrics=list(SASS_METRICS),
                cubin_dir=cubins,
                timeout_s=timeout_s,
            )
            records = parse_counters(texts)
            # No second launch for these: their instructions are counted on the first, in a run of their own.
            once = records.only_launched_once()
            if once:
                more = run_counters(
                    argv,
                    cwd=cwd,
                    kernels=once,
                    metrics=[],
                    sass_metrics=list(SASS_METRICS),
                    cubin_dir=cubins,
                    timeout_s=timeout_s,
                    metrics_launch=0,
                    sass_launch=1,
                )
                texts += more
                records = parse_counters(more, records)
            wanted = sorted({k.sass.cubin for k in records.kernels.values() if k.sass is not None})
            with ThreadPoolExecutor(max_workers=4) as pool:
                texts_of = pool.map(lambda crc: disassemble(nvdisasm, cubins / f"{crc}.cubin"), wanted)
                listings = dict(zip(wanted, texts_of, strict=True))
        problem = environment_problem(records)
        if problem is not None:
            hint = PERMISSION_HINT if "PRIVILEGE" in problem.upper() else None
            raise ProfileError(f"CUPTI counted nothing: {problem}", hint=hint)
        if self.record is not None:
            self._write_recording(texts, listings)
        self._notes = counter_notes(records, kernels)
        self._device = device_from_counters(records, self.device())
        parsed = {crc: parse_listing(text) for crc, text in listings.items()}
        return profiles_from_counters(records, parsed, kernels, arch=arch, resolve=None)

    def _write_recording(self, texts: Sequence[str], listings: dict[int, str]) -> None:
        assert self.record is not None
        self.record.mkdir(parents=True, exist_ok=True)
        for stale in [*self.record.glob("counters-*.jsonl"), *self.record.glob("sass-*.txt")]:
            stale.unlink()  # a file of an earlier recording would be read with these
        for index, text in enumerate(texts, start=1):
            (self.record / COUNTERS_FILE.format(index=index)).write_text(text)
        for crc, text in listings.items():
            (self.record / LISTING_FILE.format(cubin=crc)).write_text(text)

    def intra_kernel(
        self, argv: Sequence[str], *, cwd: Path, kernel: RankedKernel, timeout_s: float
    ) -> IntraKernelProfile:
        return run_regions(argv, cwd=cwd, kernel=kernel.name, timeout_s=timeout_s, record=self.record)

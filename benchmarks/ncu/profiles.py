"""Profiles from Nsight Compute's pages (recordings made before 2026-11-27), in the formulas' terms through
the product's NVIDIA table: what the CUPTI counter pass's profiles are compared with
(tests/intelliperf/backends/test_cupti_counters.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from benchmarks.ncu.kernel_names import same_kernel
from benchmarks.ncu.pages import RawKernel, parse_raw_csv
from benchmarks.ncu.source import (
    COLUMNS,
    instructions_from_cuda_sass,
    join_source_views,
    kernels_without_line_info,
    parse_cuda_sass_view,
    parse_sass_view,
)
from intelliperf.contract import RankedKernel
from intelliperf.contract.kernel_names import function_name
from intelliperf.contract.profile import Instruction, KernelProfile
from intelliperf.gpu.nvidia.metrics import instruction_kind
from intelliperf.gpu.nvidia.profiles import kernel_profile, rehomed

__all__ = ["DEVICE_METRICS", "build_profiles", "semantic_instruction"]

T = TypeVar("T")

DEVICE_METRICS = ("device__attribute_multiprocessor_count", "device__attribute_l2_cache_size")
"""The raw page's device facts (SM count, L2 size): the ncu pass read them with its metrics, as the CUPTI
pass reads them from the driver (`intelliperf.gpu.nvidia.profiles.device_from_counters`)."""


def semantic_instruction(instruction: Instruction) -> Instruction:
    """A parsed source-page instruction in the formulas' terms: its columns renamed, its kind set."""
    metrics = {COLUMNS[name]: value for name, value in instruction.metrics.items() if name in COLUMNS}
    return replace(instruction, metrics=metrics, kind=instruction_kind(instruction.assembly))


def build_profiles(
    raw_csv: str,
    cuda_sass_csv: str,
    sass_csv: str | None,
    kernels: Sequence[RankedKernel],
    *,
    arch: str,
    resolve: Path | None = None,
) -> dict[str, KernelProfile]:
    """From Nsight Compute's pages: a profile for each ranked kernel that ncu profiled; the first profiled
    launch of each counts.

    Instructions come from the CUDA+SASS page; the SASS page, exported only when some kernel has no line
    info, adds the kernels that page leaves out."""
    raw: dict[str, RawKernel] = {}
    for entry in parse_raw_csv(raw_csv):
        raw.setdefault(entry.name, entry)
    parsed = {
        **(parse_sass_view(sass_csv) if sass_csv is not None else {}),
        **instructions_from_cuda_sass(cuda_sass_csv),
    }
    instructions = {
        kernel: {address: semantic_instruction(i) for address, i in by_address.items()}
        for kernel, by_address in parsed.items()
    }
    structure = parse_cuda_sass_view(cuda_sass_csv)
    source = join_source_views(structure, instructions)
    without_lines = kernels_without_line_info(cuda_sass_csv)
    profiles = {}
    for kernel in kernels:
        entry = _lookup(raw, kernel)
        if entry is None:
            continue
        profiles[kernel.name] = kernel_profile(
            kernel,
            entry.metrics,
            tuple((_lookup(instructions, kernel) or {}).values()),
            rehomed(_lookup(source, kernel) or [], resolve),
            arch=arch,
            resolve=resolve,
            source_page=_lookup(structure, kernel) is not None or _named(without_lines, kernel),
        )
    return profiles


def _lookup(by_ncu_name: Mapping[str, T], kernel: RankedKernel) -> T | None:
    """The entry for ``kernel``: by its mangled name (the pages the counter pass exports), else by
    signature (pages recorded with ncu's demangling)."""
    if kernel.name in by_ncu_name:
        return by_ncu_name[kernel.name]
    for name, value in by_ncu_name.items():
        if same_kernel(name, kernel.name, kernel.demangled):
            return value
    return None


def _named(names: set[str], kernel: RankedKernel) -> bool:
    """Whether one of ``names`` (as ncu's warnings give them: mangled or the bare function name) is
    ``kernel``."""
    return any(
        name in (kernel.name, function_name(kernel.demangled))
        or same_kernel(name, kernel.name, kernel.demangled)
        for name in names
    )

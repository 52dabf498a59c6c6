"""Turn the counter pass's pages into one KernelProfile per kernel, in the formulas' terms
(formulas.quantities, through the NVIDIA table in nvidia_metrics)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from formulas.base import KernelProfile, SourceRow
from formulas.quantities import Quantity
from intelliperf.contract import DeviceInfo, RankedKernel
from intelliperf.gpu.kernel_names import function_name, same_kernel
from intelliperf.gpu.ncu import RawKernel, parse_raw_csv
from intelliperf.gpu.ncu_source import (
    instructions_from_cuda_sass,
    join_source_views,
    kernels_without_line_info,
    parse_cuda_sass_view,
    parse_sass_view,
)
from intelliperf.gpu.nvidia_metrics import kernel_quantities, semantic_instruction

__all__ = ["DEVICE_METRICS", "build_profiles", "device_from_raw", "read_sources"]

T = TypeVar("T")


def read_sources(rows: Sequence[SourceRow], resolve: Path | None) -> dict[str, list[str]]:
    """Source text of every file the rows name, found as recorded or, failing that, under `resolve`.

    A profile recorded elsewhere names files by the paths they had there; the longest path suffix
    that exists under `resolve` (the project directory) is taken to be the same file.
    """
    texts: dict[str, list[str]] = {}
    for file in dict.fromkeys(r.file for r in rows):
        path = _locate(file, resolve)
        if path is not None:
            texts[file] = path.read_text(errors="replace").splitlines()
    return texts


def _locate(file: str, resolve: Path | None) -> Path | None:
    recorded = Path(file)
    if resolve is None:
        return recorded if recorded.is_file() else None
    parts = recorded.parts
    for start in range(1, len(parts)):
        candidate = resolve.joinpath(*parts[start:])
        if candidate.is_file():
            return candidate
    return recorded if recorded.is_file() else None


def _rehome(rows: Sequence[SourceRow], resolve: Path | None) -> list[SourceRow]:
    """Rows whose file was found under ``resolve`` renamed to that path, so locations name the project's
    file rather than the path it had on the machine that recorded the profile."""
    if resolve is None:
        return list(rows)
    found = {file: _locate(file, resolve) for file in dict.fromkeys(r.file for r in rows)}
    resolved = resolve.resolve()
    return [
        replace(r, file=str(path))
        if (path := found[r.file]) is not None and path.resolve().is_relative_to(resolved)
        else r
        for r in rows
    ]


def build_profiles(
    raw_csv: str,
    cuda_sass_csv: str,
    sass_csv: str | None,
    kernels: Sequence[RankedKernel],
    *,
    arch: str,
    resolve: Path | None = None,
) -> dict[str, KernelProfile]:
    """A profile for each ranked kernel that ncu profiled; the first profiled launch of each counts.

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
        rows = _rehome(_lookup(source, kernel) or [], resolve)
        kernel_instructions = tuple((_lookup(instructions, kernel) or {}).values())
        quantities = kernel_quantities(entry.metrics, kernel_instructions, arch)
        profiles[kernel.name] = KernelProfile(
            name=kernel.name,
            demangled=kernel.demangled,
            duration_ns=quantities.get(Quantity.KERNEL_TIME_NS, kernel.median_ns),
            metrics=quantities,
            instructions=kernel_instructions,
            source=rows,
            source_text=read_sources(rows, resolve),
            launches=kernel.launches,
            total_ns=kernel.total_ns,
            arch=arch,
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


DEVICE_METRICS = ("device__attribute_multiprocessor_count", "device__attribute_l2_cache_size")
"""The raw page's device facts that `device_from_raw` reads: the counter pass reads them with its metrics."""


def device_from_raw(raw_csv: str, fallback: DeviceInfo) -> DeviceInfo:
    """The device facts ncu reports (SM count, L2 size) added to what the device probe said."""
    entries = parse_raw_csv(raw_csv)
    metrics = entries[0].metrics
    sm_count, l2 = (metrics.get(name) for name in DEVICE_METRICS)
    return fallback.model_copy(
        update={
            "sm_count": int(sm_count) if sm_count else fallback.sm_count,
            "l2_bytes": int(l2) if l2 else fallback.l2_bytes,
        }
    )

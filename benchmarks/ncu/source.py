"""Per-source-line counters from Nsight Compute's source page (recordings made before 2026-11-27).

- ``--page source --print-source cuda,sass``: for each kernel, blocks of ``File Path`` /
  ``Function Name`` / a header, then each CUDA source line followed by the SASS instructions
  attributed to it, each with every per-instruction metric. An instruction can be listed under
  several lines (an inlined atomicAdd sits under its toolkit header line and again under the call
  site), with the same values each time, so the kernel's instructions are its distinct addresses
  (`instructions_from_cuda_sass`): counted once, totals are not doubled.
- ``--page source --print-source sass``: for each kernel, a ``Kernel Name`` row, a header and one
  row per instruction. Only needed for kernels without line info, which the CUDA view leaves out.

The two are joined by instruction address.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from benchmarks.ncu.pages import csv_rows, parse_number
from formulas.base import is_toolkit_file
from intelliperf.contract.profile import Column, Instruction, SourceRow
from intelliperf.errors import ProfileError
from intelliperf.gpu.nvidia.profiles import sum_metrics

__all__ = [
    "COLUMNS",
    "NO_LINE_INFO_MARKER",
    "SourceLine",
    "instructions_from_cuda_sass",
    "join_source_views",
    "kernels_without_line_info",
    "parse_cuda_sass_view",
    "parse_sass_view",
]

COLUMNS: dict[str, Column] = {
    "Instructions Executed": Column.EXECUTED,
    "Thread Instructions Executed": Column.THREADS_EXECUTED,
    "L1 Wavefronts Shared": Column.SHARED_ACCESS_UNITS,
    "L1 Wavefronts Shared Ideal": Column.SHARED_ACCESS_UNITS_IDEAL,
    "L1 Wavefronts Shared Excessive": Column.SHARED_ACCESS_UNITS_EXCESS,
    "L2 Theoretical Sectors Global": Column.GLOBAL_SECTORS,
    "L2 Theoretical Sectors Global Ideal": Column.GLOBAL_SECTORS_IDEAL,
    "L2 Theoretical Sectors Global Excessive": Column.GLOBAL_SECTORS_EXCESS,
}
"""Source-page column (as sections/IntelliPerfSource.section labels it) -> per-instruction column."""

NO_LINE_INFO_MARKER = "No lineinfo available"
_NO_LINE_INFO = re.compile(NO_LINE_INFO_MARKER + r" to show CUDA-C source related to '([^']+)'")


def kernels_without_line_info(text: str) -> set[str]:
    """The kernels the CUDA source view has no lines for: ncu leaves them out and only warns
    ``==WARNING== No lineinfo available to show CUDA-C source related to 'transpose_tiled'.``"""
    return set(_NO_LINE_INFO.findall(text))


def parse_sass_view(text: str) -> dict[str, dict[str, Instruction]]:
    """Kernel name -> instruction address -> instruction with its numeric metrics."""
    return _instructions(text, kernel_key="Kernel Name", header_key="Address", address_column=0)


def instructions_from_cuda_sass(text: str) -> dict[str, dict[str, Instruction]]:
    """Kernel name -> instruction address -> instruction, from the CUDA+SASS view: each distinct address
    once, with the metrics of its first listing (every listing of an address carries the same values)."""
    return _instructions(text, kernel_key="Function Name", header_key="Line No", address_column=2)


def _instructions(
    text: str, *, kernel_key: str, header_key: str, address_column: int
) -> dict[str, dict[str, Instruction]]:
    """The instruction rows of a source page: blank up to ``address_column``, then the address, the SASS
    text and one value per column of the header row that precedes them."""
    kernels: dict[str, dict[str, Instruction]] = {}
    current: dict[str, Instruction] | None = None
    header: list[str] = []
    first_metric = address_column + 2
    for row in csv_rows(text):
        if not row:
            continue
        if row[0] == kernel_key and len(row) >= 2:
            current, header = kernels.setdefault(row[1], {}), []
        elif row[0] == header_key:
            header = row
        elif (
            current is not None
            and header
            and len(row) >= first_metric
            and row[address_column].startswith("0x")
            and not any(row[:address_column])
            and row[address_column] not in current
        ):
            address, sass = row[address_column], row[address_column + 1].strip()
            metrics = _numbers(header[first_metric:], row[first_metric:])
            current[address] = Instruction(address=address, assembly=sass, metrics=metrics)
    return kernels


def _numbers(names: list[str], values: list[str]) -> dict[str, float]:
    numbers = {}
    for name, value in zip(names, values, strict=False):
        number = parse_number(value)
        if number is not None:
            numbers[name] = number
    return numbers


@dataclass
class SourceLine:
    file: str
    line: int
    code: str
    addresses: list[str]


def parse_cuda_sass_view(text: str) -> dict[str, list[SourceLine]]:
    """Kernel name -> its CUDA source lines, each with the addresses of its SASS instructions."""
    kernels: dict[str, list[SourceLine]] = {}
    file_path = ""
    lines: list[SourceLine] | None = None
    current: SourceLine | None = None
    for row in csv_rows(text):
        if not row:
            continue
        key = row[0]
        if key == "File Path" and len(row) >= 2:
            file_path, current = row[1], None
        elif key == "Function Name" and len(row) >= 2:
            lines, current = kernels.setdefault(row[1], []), None
        elif key == "Line No" or lines is None:
            continue
        elif key.isdigit() and len(row) >= 2:
            current = SourceLine(file=file_path, line=int(key), code=row[1], addresses=[])
            lines.append(current)
        elif key == "" and len(row) >= 3 and row[2].startswith("0x") and current is not None:
            current.addresses.append(row[2])
    return kernels


def join_source_views(
    structure: Mapping[str, list[SourceLine]], instructions: Mapping[str, Mapping[str, Instruction]]
) -> dict[str, list[SourceRow]]:
    """Kernel name -> source rows with the summed metrics of the instructions attributed to each line."""
    if not structure and not instructions:
        raise ProfileError("the ncu source page has no kernel in it")
    result: dict[str, list[SourceRow]] = {}
    for kernel, by_address in instructions.items():
        rows = []
        for line in _with_call_sites(structure.get(kernel, [])):
            attributed = [by_address[a] for a in dict.fromkeys(line.addresses) if a in by_address]
            if not attributed:
                continue
            rows.append(
                SourceRow(
                    file=line.file,
                    line=line.line,
                    code=line.code,
                    metrics=sum_metrics(inst.metrics for inst in attributed),
                    instructions=tuple(attributed),
                )
            )
        result[kernel] = rows
    return result


def _with_call_sites(lines: list[SourceLine]) -> list[SourceLine]:
    """Give the user's call site the instructions ncu attributes only to an inlined toolkit line.

    ncu lists the first instruction of an inlined toolkit function (atomicAdd's body in
    device_atomic_functions.hpp, say) under both the toolkit line and the call site, and the rest
    under the toolkit line alone; the call site learned from the first is given the rest.
    """
    owners: dict[str, list[SourceLine]] = {}
    for line in lines:
        for address in line.addresses:
            owners.setdefault(address, []).append(line)
    call_site: dict[tuple[str, int], SourceLine] = {}
    for owned_by in owners.values():
        user = [line for line in owned_by if not is_toolkit_file(line.file)]
        for line in owned_by:
            if is_toolkit_file(line.file) and user:
                call_site.setdefault((line.file, line.line), user[0])
    for address, owned_by in owners.items():
        if all(is_toolkit_file(line.file) for line in owned_by):
            for line in owned_by:
                site = call_site.get((line.file, line.line))
                if site is not None and address not in site.addresses:
                    site.addresses.append(address)
    return lines

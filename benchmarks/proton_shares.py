"""Proton's region shares against the hardware's warp-state sampler on the uninstrumented kernel.

What a user reads in Proton's profile is how the kernel's time divides among its regions (a load, an
atomic, a loop). An independent measurement of the same division is Nsight Compute's warp-state sampling
(the SourceCounters section's "Warp Stall Sampling (All Samples)"): every few hundred cycles each SM
sub-partition samples one resident warp's program counter, so the samples on a region's instructions are
proportional to the warp-cycles spent there. It runs on the plain kernel, so it also checks that the
instrumentation did not shift the division.

Both sides count the same span: Proton's shares are a region's cycles over the whole-body scope's; the
sampler's are the samples on the lines of a region's statement (all lines of a loop) over the samples on
every line of the function's body and on inlined library lines (Triton's own reductions). Samples on the
`def` line (argument loads, program ids) fall before Proton's first record and are left out on both
sides. A sampled warp stalled on a load's result is counted at the instruction that waits, which is in the
load's statement when the statement uses it (Triton's masked loads do), else in the next one: the error
below includes that difference of attribution.

share error of a region = |Proton's share - the sampler's share|; an example's error is its largest.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from formulas.base import is_toolkit_file  # noqa: E402
from intelliperf.gpu.ncu import csv_rows  # noqa: E402

__all__ = ["SAMPLES", "function_span", "region_spans", "sampled_lines", "share_errors"]

SAMPLES = "Warp Stall Sampling (All Samples)"


def sampled_lines(page: str, kernel: str) -> dict[tuple[str, int], float]:
    """(file, line) -> warp-state samples of ``kernel``'s instructions attributed to it, from ncu's source
    page (``--page source --print-source cuda,sass --csv``). An instruction listed under several lines (an
    inlined function under its own line and its call site) counts under the first line of the user's code
    it is listed under, else under the first one: each sample once."""
    owners: dict[str, tuple[str, int]] = {}
    samples: dict[str, float] = {}
    file, function, header, line = "", "", [], 0
    for row in csv_rows(page):
        if not row:
            continue
        if row[0] == "File Path" and len(row) > 1:
            file = row[1]
        elif row[0] == "Function Name" and len(row) > 1:
            function, header = row[1], []
        elif row[0] == "Line No":
            header = row
        elif function != kernel or not header:
            continue
        elif row[0].isdigit():
            line = int(row[0])
        elif row[0] == "" and len(row) > 2 and row[2].startswith("0x"):
            address = row[2]
            column = header.index(SAMPLES) if SAMPLES in header else -1
            if column < 0 or column >= len(row):
                continue
            value = float(row[column].replace(",", "") or 0)
            samples[address] = value
            current = owners.get(address)
            if current is None or (is_toolkit_file(current[0]) and not is_toolkit_file(file)):
                owners[address] = (file, line)
    by_line: dict[tuple[str, int], float] = {}
    for address, owner in owners.items():
        by_line[owner] = by_line.get(owner, 0.0) + samples[address]
    return by_line


def region_spans(source: str, regions: Sequence[Mapping[str, object]]) -> dict[str, tuple[int, int]]:
    """Region name -> (first, last) line of its statement in ``source`` (a loop: its whole body)."""
    starts: dict[int, int] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.stmt) and node.end_lineno is not None:
            starts[node.lineno] = max(starts.get(node.lineno, node.lineno), node.end_lineno)
    spans = {}
    for region in regions:
        line = int(str(region["line"]))
        if region["kind"] != "kernel" and line in starts:
            spans[str(region["name"])] = (line, starts[line])
    return spans


def function_span(source: str, def_line: int) -> tuple[int, int]:
    for node in ast.walk(ast.parse(source)):
        lines = (
            {node.lineno, *(d.lineno for d in node.decorator_list)}
            if isinstance(node, ast.FunctionDef)
            else ()
        )
        if def_line in lines and isinstance(node, ast.FunctionDef):
            return node.lineno, node.end_lineno or node.lineno
    raise ValueError(f"no function defined at line {def_line}")


def share_errors(
    proton_shares: Mapping[str, float],
    samples: Mapping[tuple[str, int], float],
    spans: Mapping[str, tuple[int, int]],
    kernel_file: str,
    body: tuple[int, int],
) -> dict[str, dict[str, float]]:
    """Per region: Proton's share, the sampler's share and their absolute difference."""

    def own(file: str) -> bool:
        return Path(file).name == Path(kernel_file).name

    def_line, last = body
    total = sum(v for (file, line), v in samples.items() if not own(file) or def_line < line <= last)
    result = {}
    for name, (first, end) in spans.items():
        if name not in proton_shares or total <= 0:
            continue
        sampled = sum(v for (file, line), v in samples.items() if own(file) and first <= line <= end) / total
        result[name] = {
            "proton": round(proton_shares[name], 4),
            "sampled": round(sampled, 4),
            "error": round(abs(proton_shares[name] - sampled), 4),
        }
    return result

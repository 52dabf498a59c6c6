"""Proton's region shares against the hardware's warp-state sampler: by source line on the uninstrumented
kernel, and by program counter on one launch of the instrumented kernel that both measure at once.

What a user reads in Proton's profile is how the kernel's time divides among its regions (a load, an atomic, a
loop). An independent measurement of the same division is Nsight Compute's warp-state sampling (the
SourceCounters section's "Warp Stall Sampling (All Samples)"): every 32 cycles (at ``--warp-sampling-interval
0``) each SM sub-partition samples one resident warp's program counter, so the samples on a region's
instructions are proportional to the warp-cycles spent there. It runs on the plain kernel, so it also checks
that the instrumentation did not shift the division.

Both sides count the same span: Proton's shares are a region's cycles over the whole-body scope's; the
sampler's are the samples on the lines of a region's statement (all lines of a loop) over the samples on every
line of the function's body and on inlined library lines (Triton's own reductions). Samples on the `def` line
(argument loads, program ids) fall before Proton's first record and are left out on both sides. A sampled warp
stalled on a load's result is counted at the instruction that waits, which is in the load's statement when the
statement uses it (Triton's masked loads do), else in the next one: the error below includes that difference
of attribution.

share error of a region = |Proton's share - the sampler's share|; an example's error is its largest.

That comparison is of two different binaries and two attributions (a clock-read span against source lines), so
it also measures how the two attribute a load's latency. The same launch measured both ways
(`instrumented_spans`, what benchmarks/proton.py reports as the accuracy) compares like with like: ncu runs
the instrumented kernel, and its sampler's samples are assigned to Proton's regions by program counter. Each
Proton record reads the clock with ``CS2R.32 Rn, SR_CLOCKLO`` (then ``SR_CLOCKHI``); the runner's records
follow one another in program order (`record_order`), so the k-th clock read in the kernel's SASS (address
order) is the k-th record. A warp sampled at a program counter has not issued that instruction yet, so a
region takes the samples after its enter record's clock read up to and including its exit record's. Its share
is those samples over the kernel scope's; the fraction of all the kernel's samples that fall inside the kernel
scope, times the launch's resident warp-cycles (``smsp__warps_active.sum``), is the hardware's count of the
cycles Proton measures between each warp's first and last record. Nsight Compute's sampler picks one resident
warp per sub-partition at each interval, so samples are proportional to warp-cycles where the number of
resident warps is steady: the error includes what departs from that.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.ncu.source import instructions_from_cuda_sass, parse_cuda_sass_view
from formulas.base import is_toolkit_file
from intelliperf.gpu.proton_runner import instrument

ROOT = Path(__file__).resolve().parents[1]
__all__ = [
    "SAMPLES",
    "InstrumentedSpans",
    "function_span",
    "instrumented_spans",
    "record_order",
    "region_spans",
    "same_launch_accuracy",
    "sampled_instructions",
    "sampled_lines",
    "share_errors",
]

SAMPLES = "Warp Stall Sampling (All Samples)"
CLOCK_READ = "SR_CLOCKLO"


def sampled_lines(page: str, kernel: str) -> dict[tuple[str, int], float]:
    """(file, line) -> warp-state samples of ``kernel``'s instructions attributed to it, from ncu's source
    page (``--page source --print-source cuda,sass --csv``). An instruction listed under several lines (an
    inlined function under its own line and its call site) counts under the first line of the user's code
    it is listed under, else under the first one: each sample once."""
    samples = {
        address: instruction.metrics[SAMPLES]
        for address, instruction in instructions_from_cuda_sass(page).get(kernel, {}).items()
        if SAMPLES in instruction.metrics
    }
    owners: dict[str, tuple[str, int]] = {}
    for line in parse_cuda_sass_view(page).get(kernel, []):
        for address in line.addresses:
            current = owners.get(address)
            if address in samples and (
                current is None or (is_toolkit_file(current[0]) and not is_toolkit_file(line.file))
            ):
                owners[address] = (line.file, line.line)
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


def sampled_instructions(page: str, kernel: str) -> list[tuple[int, str, float]]:
    """``kernel``'s instructions in address order, each once: (address, SASS, warp-state samples), from a
    source page with the sampler's column (``--page source --print-source cuda,sass --csv``); none where an
    instruction has no sample count (the column missing, or `n/a`: never read as 0)."""
    instructions = instructions_from_cuda_sass(page).get(kernel, {}).values()
    if any(SAMPLES not in i.metrics for i in instructions):
        return []
    return sorted((int(i.address, 16), i.assembly, i.metrics[SAMPLES]) for i in instructions)


def record_order(source: str, kernel: str) -> list[tuple[str, str]]:
    """The runner's records in ``kernel`` (a function of ``source``, a Python file) in program order:
    ("enter" or "exit", region name), as `proton_runner.instrument` places them."""
    tree = ast.parse(source)
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    if function is None:
        raise ValueError(f"no function {kernel} in the source")
    text = "\n".join(source.splitlines()[function.lineno - 1 : function.end_lineno])
    instrumented, _ = instrument(text, function.lineno)
    return [(action, name) for action, name in re.findall(r"(enter|exit)_scope\('([^']+)'\)", instrumented)]


@dataclass(frozen=True)
class InstrumentedSpans:
    """What the sampler saw of Proton's records on the instrumented kernel."""

    inside: float
    """Share of the kernel's samples between the kernel scope's records."""
    shares: dict[str, float]
    """Region -> its samples over the kernel scope's."""


def instrumented_spans(
    instructions: Sequence[tuple[int, str, float]], records: Sequence[tuple[str, str]]
) -> InstrumentedSpans | None:
    """The sampler's view of each region of the instrumented kernel; None when the clock reads do not pair
    one to one with the records (a loop the compiler duplicated, a record it removed) or there is no
    kernel scope: then no sample can be given to a region with certainty."""
    clocks = [i for i, (_, sass, _) in enumerate(instructions) if CLOCK_READ in sass]
    if len(clocks) != len(records) or ("enter", "kernel") not in records:
        return None
    at: dict[str, dict[str, int]] = {}
    for (action, region), index in zip(records, clocks, strict=True):
        at.setdefault(region, {})[action] = index

    def samples(region: str) -> float:
        span = at[region]
        return sum(s for _, _, s in instructions[span["enter"] + 1 : span["exit"] + 1])

    total = sum(s for _, _, s in instructions)
    kernel = samples("kernel")
    if total <= 0 or kernel <= 0:
        return None
    shares = {region: samples(region) / kernel for region in at if region != "kernel"}
    return InstrumentedSpans(inside=kernel / total, shares=shares)


def same_launch_accuracy(
    cycles: Mapping[str, Mapping[str, float]],
    page: str,
    source: str,
    kernel: str,
    resident_warp_cycles: float,
) -> dict[str, object]:
    """Proton against the sampler on one launch of the instrumented kernel, both reading it at once.

    ``cycles`` is Proton's scopes of that launch (`scope_metrics`), ``page`` ncu's source page with the
    sampler's column for it, ``source`` the kernel's file and ``resident_warp_cycles`` the launch's
    ``smsp__warps_active.sum``. error and the regions' errors are None where the sampler's view cannot be
    given to Proton's regions (see `instrumented_spans`)."""
    whole = float(cycles["kernel"]["cycles"])
    spans = instrumented_spans(sampled_instructions(page, kernel), record_order(source, kernel))
    shares: dict[str, dict[str, float]] = {}
    error = None
    if spans is not None:
        inside = spans.inside * resident_warp_cycles
        error = round(abs(whole - inside) / inside, 4)
        for region, sampled in spans.shares.items():
            measured = float(cycles[region]["cycles"]) / whole
            shares[region] = {
                "proton": round(measured, 4),
                "sampled": round(sampled, 4),
                "error": round(abs(measured - sampled), 4),
            }
    return {
        "proton_warp_cycles": whole,
        "resident_warp_cycles": resident_warp_cycles,
        "inside_records": None if spans is None else round(spans.inside, 4),
        "error": error,
        "share_error": max((r["error"] for r in shares.values()), default=None),
        "shares": shares,
        "residency_gap": round(abs(whole - resident_warp_cycles) / resident_warp_cycles, 4),
    }

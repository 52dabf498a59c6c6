"""What the model is told: one DSPy Signature per formula, and the text it is given (the GPU, the kernel
source with its hot lines marked, the metrics, and every earlier attempt's outcome, in words).

Everything the model sees is rendered text, never an object's repr: a compiler error is condensed to its
error lines, a failed validation to Accordo's reason, a slowdown to its measured interval.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from intelliperf.contract import Diagnosis, IntraKernelProfile
from intelliperf.contract.report import Attempt, DeviceInfo

__all__ = [
    "TRITON_NOTE",
    "condense_compiler_output",
    "render_attempts",
    "render_device",
    "render_regions",
    "render_source",
    "signature_for",
]

TRITON_NOTE = (
    "The kernel is a Triton kernel (a @triton.jit function) in Python, compiled when the program runs: "
    "rewrite the function, and where the fix needs it its launch (the grid, block sizes, num_warps, "
    "num_stages); keep the kernel's name, its parameters and its results."
)

EDIT_FORMAT = """Answer with edits only, in this format (the file's path relative to the project on the line
before each block; SEARCH must quote the current lines exactly and occur once):

path/to/file.cu
<<<<<<< SEARCH
exact current lines
=======
new lines
>>>>>>> REPLACE

Keep the kernel's name, parameters and what it computes: the rewrite is checked against the original
on the same inputs, launch by launch, and must write the same outputs, leave inputs untouched and launch
the same number of times."""

BASE_INSTRUCTIONS = """You are a GPU performance engineer. A profiler found a bottleneck in a CUDA kernel;
rewrite the kernel so the bottleneck goes away and the kernel gets faster, without changing its results.
"""


def render_device(device: DeviceInfo | None) -> str:
    if device is None:
        return "unknown GPU"
    facts = [f"{device.name} ({device.arch})", f"warp size {device.warp_size}"]
    facts.append(f"{device.shared_memory_banks} shared-memory banks of 4 bytes")
    if device.sm_count:
        facts.append(f"{device.sm_count} SMs")
    if device.l2_bytes:
        facts.append(f"L2 cache {device.l2_bytes / 2**20:.0f} MiB")
    if device.memory_bytes:
        facts.append(f"{device.memory_bytes / 2**30:.0f} GiB device memory")
    return ", ".join(facts)


def render_source(path: str, text: str, diagnosis: Diagnosis) -> str:
    """The file with line numbers; lines the diagnosis points at carry a marker with their share."""
    shares = {
        loc.line: loc.share
        for loc in diagnosis.locations
        if loc.file.endswith(path) or path.endswith(loc.file)
    }
    lines = []
    for number, line in enumerate(text.splitlines(), start=1):
        mark = f"    // <-- HOT: {shares[number]:.0%} of the bottleneck" if number in shares else ""
        lines.append(f"{number:5d} | {line}{mark}")
    return f"// file: {path}\n" + "\n".join(lines)


def render_regions(profile: IntraKernelProfile | None) -> str:
    """The intra-kernel profile as evidence for the model: one line per region."""
    if profile is None or not profile.regions:
        return ""
    lines = [f"Cycles inside the kernel, per region (Proton instrumentation, {profile.note}):"]
    for region in profile.regions:
        code = f": {region.text}" if region.text else ""
        lines.append(
            f"- {region.kind} at line {region.line}{code} — {region.share:.0%} of the kernel's cycles, "
            f"{region.cycles_per_warp:,.0f} cycles per warp"
        )
    return "\n".join(lines)


def render_metrics(diagnosis: Diagnosis) -> str:
    numbers = ", ".join(f"{name} = {value:.4g}" for name, value in sorted(diagnosis.metrics.items()))
    return f"{diagnosis.summary}\n{diagnosis.reasoning}\nMetrics: {numbers}"


_ERROR_LINE = re.compile(r"(error|fatal)", re.IGNORECASE)


def condense_compiler_output(output: str, limit: int = 12) -> str:
    """The compiler's error lines (and the line after each, where nvcc shows the source), at most
    ``limit`` lines."""
    lines = output.splitlines()
    keep: list[str] = []
    for k, line in enumerate(lines):
        if _ERROR_LINE.search(line) and line not in keep:
            keep.append(line.strip())
            if k + 1 < len(lines) and lines[k + 1].strip() and not _ERROR_LINE.search(lines[k + 1]):
                keep.append("    " + lines[k + 1].strip())
        if len(keep) >= limit:
            break
    return "\n".join(keep) if keep else "\n".join(lines[-limit:])


def render_attempts(attempts: list[Attempt]) -> str:
    if not attempts:
        return "No earlier attempts."
    parts = []
    for attempt in attempts:
        head = f"Attempt {attempt.index}: {attempt.status.replace('_', ' ')}"
        body = []
        if attempt.reason:
            body.append(attempt.reason)
        speedup = attempt.validation.speedup if attempt.validation else None
        if speedup is not None:
            body.append(
                f"measured speedup {speedup.median:.3f}x (95% interval {speedup.low:.3f} to "
                f"{speedup.high:.3f}): {speedup.verdict}"
            )
        if attempt.metric_before is not None and attempt.metric_after is not None:
            body.append(
                f"bottleneck metric {attempt.metric_before:.4g} before, {attempt.metric_after:.4g} after"
            )
        if attempt.diff:
            body.append("The edit was:\n" + attempt.diff.strip())
        parts.append(head + ("\n" + "\n".join(body) if body else ""))
    return "\n\n".join(parts)


@cache
def signature_for(formula: str, guidance: str) -> Any:
    """The DSPy Signature for one formula: shared instructions plus the formula's own guidance."""
    import dspy

    class OptimizeKernel(dspy.Signature):
        gpu: str = dspy.InputField(desc="The GPU the kernel runs on")
        bottleneck: str = dspy.InputField(desc="What the profiler measured, and why it is a bottleneck")
        source: str = dspy.InputField(desc="The kernel's source file with line numbers; hot lines are marked")
        attempts: str = dspy.InputField(desc="Earlier attempts and what happened to each")
        edit: str = dspy.OutputField(desc="SEARCH/REPLACE blocks, in the required format")

    instructions = f"{BASE_INSTRUCTIONS}\nThe bottleneck: {formula}. {guidance}\n\n{EDIT_FORMAT}"
    return OptimizeKernel.with_instructions(instructions)

"""Helpers for tests that replay the profiles recorded on the GPU machine (tests/fixtures/gpu)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.diagnose import is_kernel
from benchmarks.diagnose import marker_line as marker_in
from intelliperf.contract import Application, JobSpec, RankedKernel, Report
from intelliperf.contract.profile import KernelProfile
from intelliperf.engine.diagnose import run_diagnosis
from intelliperf.gpu.replay import ReplayBackend

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "fixtures" / "gpu"
EXAMPLES = ROOT / "examples"
MANIFEST = json.loads((EXAMPLES / "examples.json").read_text())
BY_NAME = {example["name"]: example for example in MANIFEST}
RECORDED_EXAMPLES = [e for e in MANIFEST if (RECORDED / e["name"] / "original" / "trace.jsonl").is_file()]
"""The examples recorded on the GPU machine; an example added since has none until `benchmarks/diagnose.py
--record` runs there (tests/formulas/test_recorded_examples.py says which)."""
NCU_PAGED_EXAMPLES = sorted(
    e["name"]
    for e in RECORDED_EXAMPLES
    if all((RECORDED / e["name"] / v / "raw.csv").is_file() for v in ("original", "fixed"))
)
"""The recorded examples whose two versions also hold Nsight Compute's raw page of the same source, the
reference the CUPTI counter pass is compared with (examples added after ncu left the product have none)."""


def is_main(kernel: RankedKernel, example: dict) -> bool:
    """The example's main kernel: the instantiation its manifest names as `main` (a mangled name, where the
    kernel is a template with several instantiations), else its kernel by function name."""
    if "main" in example:
        return kernel.name == example["main"]
    return is_kernel(kernel.demangled, example["kernel"])


def replay(name: str, variant: str = "original", formula: str = "diagnoseOnly", **spec: object) -> Report:
    return replay_in(name, EXAMPLES / name, variant, formula, **spec)


def replay_in(
    name: str, project: Path, variant: str = "original", formula: str = "auto", **spec: object
) -> Report:
    """``name``'s recording diagnosed with ``project`` as its project (a changed copy of the example)."""
    job = JobSpec(applications=[Application(command=["./app"])], formula=formula, **spec)
    return run_diagnosis(job, backend=ReplayBackend(RECORDED / name / variant), project=project)


def main_profile(name: str, variant: str = "original") -> KernelProfile:
    """The example's main kernel as the formulas see it."""
    backend = ReplayBackend(RECORDED / name / variant)
    from intelliperf.gpu.backend import rank_kernels

    kernels = rank_kernels(backend.time_kernels([], cwd=EXAMPLES / name, timeout_s=1).kernels)
    profiles = backend.collect([], cwd=EXAMPLES / name, kernels=kernels, metrics=[], timeout_s=1)
    kernel = next(k for k in kernels if is_main(k, BY_NAME[name]))
    return profiles[kernel.name]


def marker_line(name: str) -> int:
    example = BY_NAME[name]
    line = marker_in(EXAMPLES / name / example["source"], example["formula"])
    assert line is not None, f"{name}: no 'intelliperf: {example['formula']}' marker"
    return line

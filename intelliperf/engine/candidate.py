"""One candidate rewrite, from the model's reply to a verdict: apply the edit to the candidate copy,
rebuild, validate it (Accordo, or the project's tests), time it against the reference, re-measure the
formula's metric.

Every way a candidate can fail becomes an Attempt with a status and a reason written for the model;
only problems that are not the candidate's (the reference, the profiler, the LLM provider) raise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from formulas.base import Formula
from formulas.selection import metrics_for
from intelliperf.contract import (
    Attempt,
    AttemptStatus,
    DeviceInfo,
    Diagnosis,
    IntraKernelProfile,
    RankedKernel,
)
from intelliperf.edits import EditError, apply_edits, parse_edits, unified_diff
from intelliperf.engine.build import run_build
from intelliperf.engine.judge import Judge
from intelliperf.errors import AppError, BuildError, ProfileError
from intelliperf.gpu.backend import GpuBackend
from intelliperf.llm.prompts import condense_compiler_output
from intelliperf.llm.proposer import Proposal
from intelliperf.process import clear_jit_cache

__all__ = ["CandidateTree", "Evaluated", "Target", "evaluate"]

Say = Callable[[str], None]


@dataclass(frozen=True)
class Target:
    """What the loop optimizes: one kernel, one formula, as the diagnosis found them."""

    kernel: RankedKernel
    formula: Formula
    diagnosis: Diagnosis
    metric_before: float
    device: DeviceInfo | None
    command: list[str]
    build_command: str | None  # None: a Python application, compiled when it runs
    build_timeout_s: float
    counters_timeout_s: float
    sources: dict[str, str]  # project-relative path: original text, the files the hot lines are in
    regions: IntraKernelProfile | None = None  # cycles per region of a Triton kernel (Proton)


@dataclass
class CandidateTree:
    """A built copy of the project where candidates are applied one after another. Before each edit the
    files the previous one changed are restored, so every candidate starts from the original and a
    rebuild recompiles only what changed."""

    root: Path
    _originals: dict[str, str | None] = field(default_factory=dict)

    def restore(self) -> None:
        for relative, text in self._originals.items():
            path = self.root / relative
            if text is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(text)
        self._originals = {}

    def apply(self, reply: str) -> dict[str, tuple[str, str]]:
        """Parse and apply ``reply``; EditError (nothing applied) when it cannot be. Kernels Triton compiled
        for the previous candidate are dropped with it."""
        self.restore()
        clear_jit_cache(self.root)
        edits = parse_edits(reply)
        existed = {os.path.normpath(e.path): (self.root / e.path).is_file() for e in edits}
        changes = apply_edits(self.root, edits)
        self._originals = {
            relative: old if existed.get(relative, True) else None for relative, (old, _) in changes.items()
        }
        return changes


@dataclass(frozen=True)
class Evaluated:
    attempt: Attempt
    new_files: dict[str, str]  # project-relative path: text after the edit


class _Clock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(time.perf_counter() - started, 3)


def _measure_metric(
    target: Target, tree: CandidateTree, backend: GpuBackend, kernel: RankedKernel
) -> float | None:
    profiles = backend.collect(
        target.command,
        cwd=tree.root,
        kernels=[kernel],
        metrics=metrics_for([target.formula]),
        timeout_s=target.counters_timeout_s,
    )
    profile = profiles.get(kernel.name)
    return None if profile is None else target.formula.bottleneck_metric(profile)


def evaluate(
    proposal: Proposal,
    *,
    index: int,
    round_: int,
    target: Target,
    tree: CandidateTree,
    judge: Judge,
    backend: GpuBackend,
    say: Say,
) -> Evaluated:
    clock = _Clock()
    clock.seconds["llm"] = round(proposal.seconds, 3)
    fields: dict[str, object] = {
        "index": index,
        "round": round_,
        "tokens_in": proposal.tokens_in,
        "tokens_out": proposal.tokens_out,
        "metric_before": target.metric_before,
        "seconds": clock.seconds,
    }

    def verdict(status: AttemptStatus, reason: str | None = None, **more: object) -> Attempt:
        return Attempt.model_validate({**fields, "status": status, "reason": reason, **more})

    if proposal.parse_error is not None:
        return Evaluated(verdict("unparseable", proposal.parse_error), {})
    try:
        changes = tree.apply(proposal.edit)
    except EditError as exc:
        return Evaluated(verdict("unparseable", f"the edit could not be applied: {exc}"), {})
    fields["files"] = sorted(changes)
    fields["diff"] = unified_diff(changes)
    new_files = {path: new for path, (_, new) in changes.items()}
    edited = ", ".join(sorted(changes))
    if target.build_command is None:
        say(f"edit applied to {edited}; validating with {judge.label} (compiled as it runs)")
    else:
        say(f"edit applied to {edited}; building")
        try:
            with clock.step("build"):
                run_build(target.build_command, cwd=tree.root, timeout_s=target.build_timeout_s)
        except BuildError as exc:
            errors = condense_compiler_output(exc.log_tail or exc.message)
            return Evaluated(verdict("build_failed", f"the build failed: {errors}"), new_files)
        say(f"built; validating with {judge.label}")
    with clock.step("validate"):
        validation = judge.check(tree.root, say)
    if not validation.passed:
        return Evaluated(verdict("invalid", validation.reason, validation=validation), new_files)
    try:
        with clock.step("measure"):
            validation = judge.time(tree.root, say, validation)
        if not validation.passed:
            return Evaluated(verdict("invalid", validation.reason, validation=validation), new_files)
        speedup = validation.speedup
        assert speedup is not None, "a judge's timing gives a speedup or a failed verdict"
        say(f"{speedup.median:.3f}x ({speedup.verdict}); re-measuring {target.formula.metric_label}")
        with clock.step("counters"):
            kernel = judge.candidate_kernel(tree.root) or target.kernel
            metric_after = _measure_metric(target, tree, backend, kernel)
    except (AppError, ProfileError) as exc:
        reason = f"measuring the validated candidate failed: {exc.message}"
        return Evaluated(verdict("error", reason, validation=validation), new_files)
    if metric_after is None:
        reason = f"{backend.profiler} did not count the kernel in the candidate's run"
        return Evaluated(verdict("error", reason, validation=validation), new_files)
    fields["metric_after"] = metric_after
    label = target.formula.metric_label
    if speedup.verdict != "faster":
        reason = (
            f"correct, but not faster: {speedup.median:.3f}x, 95% interval {speedup.low:.3f} to "
            f"{speedup.high:.3f} ({speedup.verdict})"
        )
        return Evaluated(verdict("not_faster", reason, validation=validation), new_files)
    if not target.formula.metric_improved(target.metric_before, metric_after):
        reason = (
            f"correct and {speedup.median:.2f}x faster, but the bottleneck is still there: {label} "
            f"{target.metric_before:.4g} before, {metric_after:.4g} after"
        )
        return Evaluated(verdict("no_metric_gain", reason, validation=validation), new_files)
    return Evaluated(verdict("success", None, validation=validation), new_files)

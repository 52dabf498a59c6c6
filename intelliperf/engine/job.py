"""A whole job for one application: diagnose, then (unless diagnosis is all that was asked) optimize.

Everything runs in scratch copies of the project: the diagnosis workspace is built once and is the
reference every candidate is judged against; candidates are built in a second copy. The user's tree
changes only with ``in_place``, and only by the best validated rewrite.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from formulas.base import Formula
from formulas.registry import get
from intelliperf.contract import BestResult, JobSpec, Optimization, Report
from intelliperf.engine.candidate import CandidateTree, Target
from intelliperf.engine.counter_store import CounterStore
from intelliperf.engine.diagnose import Diagnosed, diagnose_in
from intelliperf.engine.judge import AccordoJudge, Judge, options_for
from intelliperf.engine.optimize import LoopResult, run_loop
from intelliperf.engine.progress import NullProgress, Progress
from intelliperf.engine.unittest_judge import UnittestJudge
from intelliperf.engine.workspace import copy_workspace, workspace, write_back
from intelliperf.errors import SpecError
from intelliperf.gpu.backend import GpuBackend
from intelliperf.gpu.registry import backend_class
from intelliperf.llm.proposer import Proposer
from intelliperf.process import is_python_command
from intelliperf.settings import get_settings

__all__ = ["JudgeFactory", "check_optimizable", "judge_for", "run_job"]

JudgeFactory = Callable[[Target, Path, JobSpec], Judge]


def judge_for(target: Target, reference_dir: Path, spec: JobSpec) -> Judge:
    """Accordo, or the project's own tests when the spec gives a unittest command (timed by the vendor's
    own timing pass where Accordo cannot capture its launches)."""
    if spec.unittest_command:
        backend = backend_class(spec.gpu.vendor)
        return UnittestJudge(
            target.kernel,
            target.command,
            spec.unittest_command,
            reference_dir,
            options_for(spec),
            output_files=spec.applications[0].output_files,
            timing=None if backend.captures_kernels else backend(),
        )
    reproducers = reference_dir.parent / "reproducers"  # scratch, beside the workspace
    return AccordoJudge(target.kernel.name, target.command, reference_dir, options_for(spec), reproducers)


def check_optimizable(spec: JobSpec) -> None:
    """What the loop needs that can be checked before any profiling starts: a judge for the job's GPU (the
    project's tests where Accordo cannot capture the vendor's launches) and a build command, unless the
    application is a Python program that compiles its kernels when it runs."""
    if not spec.optimizes:
        return
    if not spec.unittest_command and not backend_class(spec.gpu.vendor).captures_kernels:
        raise SpecError(
            f"on {spec.gpu.vendor} GPUs Accordo cannot yet capture kernel launches, so a rewrite is judged "
            "by the project's own tests: give --unittest_command",
            hint="or diagnose only with -f diagnoseOnly",
        )
    if spec.instrument_command or spec.build_command:
        return
    if not is_python_command(spec.applications[0].command):
        raise SpecError(
            "the optimization loop rebuilds the rewritten kernel: give -b/--build_command",
            hint="or diagnose only with -f diagnoseOnly (Python applications need no build command)",
        )


def _sources(diagnosis_files: list[str], workspace_dir: Path) -> dict[str, str]:
    sources = {}
    for relative in dict.fromkeys(diagnosis_files):
        path = workspace_dir / relative
        if not Path(relative).is_absolute() and path.is_file():
            sources[relative] = path.read_text(errors="replace")
    return sources


def _target(spec: JobSpec, diagnosed: Diagnosed, workspace_dir: Path) -> Target:
    report = diagnosed.report
    assert report.selected is not None
    selected = report.selected
    kernel = next(k for k in report.kernels if k.name == selected.kernel)
    diagnosis = report.selected_diagnosis
    assert diagnosis is not None, "a selection is made of a diagnosis"
    formula: Formula = get(selected.formula)()
    regions = report.intra_kernel
    if regions is not None and regions.kernel != kernel.name:
        regions = None
    sources = _sources([loc.file for loc in diagnosis.locations], workspace_dir)
    if not sources:
        raise SpecError(
            f"the hot lines of {kernel.demangled} are not in the project's files, so there is no source "
            "to rewrite",
            hint="the kernel must be built from sources under -p/--project_directory with line info",
        )
    return Target(
        kernel=kernel,
        formula=formula,
        diagnosis=diagnosis,
        metric_before=formula.bottleneck_metric(diagnosed.profiles[kernel.name]),
        device=report.device,
        command=list(spec.applications[0].command),
        build_command=spec.instrument_command or spec.build_command,
        build_timeout_s=spec.timeouts.build_s,
        counters_timeout_s=get_settings().counters_timeout_s,
        sources=sources,
        regions=regions,
    )


def _keep_reproducer(result: LoopResult, reproducer_dir: Path | None) -> str | None:
    """The best attempt's reproducer copied to ``reproducer_dir``; its folder name, or None."""
    validation = result.best.validation if result.best is not None else None
    if reproducer_dir is None or validation is None or validation.reproducer is None:
        return None
    shutil.copytree(validation.reproducer, reproducer_dir, dirs_exist_ok=True)
    return reproducer_dir.name


def _with_loop(
    report: Report, spec: JobSpec, target: Target, result: LoopResult, seconds: float, reproducer: str | None
) -> Report:
    best = None
    if result.best is not None and result.best.speedup is not None:
        best = BestResult(
            attempt=result.best.index,
            speedup=result.best.speedup,
            metric_name=target.formula.metric_label,
            metric_before=target.metric_before,
            metric_after=result.best.metric_after or 0.0,
            files=sorted(result.best_files),
            reproducer=reproducer,
        )
    optimization = Optimization(
        status=result.status,
        note=result.note,
        kernel=target.kernel.name,
        formula=target.formula.name,
        attempts_allowed=spec.num_attempts,
        candidates_per_round=spec.candidates_per_round,
        judge="unittest" if spec.unittest_command else "accordo",
        exit_code=result.exit_code,
    )
    return report.model_copy(
        update={
            "attempts": result.attempts,
            "optimization": optimization,
            "best": best,
            "diff": result.best.diff if result.best is not None else None,
            "passes": report.passes.model_copy(update={"optimize_s": round(seconds, 3)}),
        }
    )


def run_job(
    spec: JobSpec,
    *,
    backend: GpuBackend,
    project: Path,
    proposer: Proposer | None,
    progress: Progress | None = None,
    judge_factory: JudgeFactory = judge_for,
    reproducer_dir: Path | None = None,
    counter_store: CounterStore | None = None,
) -> Report:
    """Diagnose and, with a ``proposer`` and a formula other than diagnoseOnly, optimize the selected
    bottleneck; the best candidate's reproducer (Accordo's judge) is copied to ``reproducer_dir``. Raises
    an IntelliPerfError for bad input found before the loop; an error inside the loop ends it with status
    'aborted' in the report instead."""
    progress = progress or NullProgress()
    settings = get_settings()
    optimize = proposer is not None and spec.optimizes
    if optimize:
        check_optimizable(spec)
    with workspace(project, root=settings.work_dir, keep=settings.keep_workspace, reference=True) as ws:
        diagnosed = diagnose_in(
            spec, backend=backend, ws=ws, project=project, progress=progress, counter_store=counter_store
        )
        report = diagnosed.report
        if not optimize or proposer is None:
            return report
        if report.selected is None:
            skipped = Optimization(
                status="skipped",
                note="no bottleneck to optimize: the formulas found none in the top kernels",
                attempts_allowed=spec.num_attempts,
                candidates_per_round=spec.candidates_per_round,
            )
            return report.model_copy(update={"optimization": skipped})
        try:
            target = _target(spec, diagnosed, ws)
        except SpecError as error:
            aborted = Optimization(status="aborted", note=str(error), exit_code=error.exit_code)
            return report.model_copy(update={"optimization": aborted})
        started = time.perf_counter()
        tree = CandidateTree(copy_workspace(ws, ws.parent / "candidate" / ws.name))
        result = run_loop(
            target,
            attempts_allowed=spec.num_attempts,
            per_round=spec.candidates_per_round,
            proposer=proposer,
            judge=judge_factory(target, ws, spec),
            backend=backend,
            tree=tree,
            progress=progress,
        )
        kept = _keep_reproducer(result, reproducer_dir)
        report = _with_loop(report, spec, target, result, time.perf_counter() - started, kept)
        if spec.in_place and report.best is not None:
            try:
                write_back(project, result.best_files, unchanged_since=ws)
            except SpecError as error:
                warning = f"the best rewrite was not written back: {error}"
                return report.model_copy(update={"warnings": [*report.warnings, warning]})
            report = report.model_copy(update={"best": report.best.model_copy(update={"written_back": True})})
    return report

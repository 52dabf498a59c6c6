"""Diagnosis: build, time every kernel, count what the formulas need on the top ones, decide, localize."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from formulas.base import Formula
from formulas.selection import formulas_for, metrics_for, select
from intelliperf import __version__
from intelliperf.contract import Diagnosis, JobSpec, PassTimings, RankedKernel, Report
from intelliperf.contract.kernel_names import canonical_signature
from intelliperf.contract.profile import KernelProfile
from intelliperf.engine.build import run_build
from intelliperf.engine.counter_store import CounterStore
from intelliperf.engine.kernel_source import at_kernel_definition
from intelliperf.engine.progress import NullProgress, Progress
from intelliperf.engine.project_kernels import compiled_elsewhere
from intelliperf.engine.workspace import relative_to_roots, workspace
from intelliperf.errors import KernelNotFoundError, NoLineInfoError, ProfileError, SpecError
from intelliperf.gpu.backend import GpuBackend, rank_kernels
from intelliperf.process import is_python_command
from intelliperf.settings import get_settings

__all__ = [
    "Diagnosed",
    "diagnose_in",
    "filter_kernels",
    "library_note",
    "minor_note",
    "project_relative",
    "run_diagnosis",
    "targets_of",
    "triton_kernel",
]


def filter_kernels(kernels: list[RankedKernel], pattern: str | None) -> list[RankedKernel]:
    if pattern is None:
        return kernels
    regex = re.compile(pattern)
    matched = [k for k in kernels if regex.search(k.name) or regex.search(k.demangled)]
    if not matched:
        seen = ", ".join(k.demangled for k in kernels[:10]) or "none"
        raise KernelNotFoundError(
            f"-k/--kernel {pattern!r} matched none of the {len(kernels)} kernels the application launched",
            hint=f"kernels seen (hottest first): {seen}",
        )
    return matched


def _short_name(kernel: RankedKernel) -> str:
    """A kernel's name without return type, namespaces' anonymous markers, template arguments or
    parameters, for one-line notes (`canonical_signature` would stop at "(anonymous namespace)")."""
    return canonical_signature(kernel.demangled.replace("(anonymous namespace)", "anon"))[0].split("<")[0]


MIN_PROFILED_SHARE = 0.05
"""Kernels below this share of GPU time are listed but not profiled: fixing one could save at most that
share of the application's GPU time, and each profiled kernel adds its replay passes and the counting of
its instructions to the counter pass."""


def targets_of(kernels: list[RankedKernel], top_n: int, *, explicit: bool = False) -> list[RankedKernel]:
    """The kernels to profile: the ``top_n`` hottest with source in the project (not library kernels)
    and at least MIN_PROFILED_SHARE of GPU time; the hottest such kernel always. ``explicit`` (the user
    named kernels with -k) profiles every match regardless of share."""
    project = [k for k in kernels if not k.library]
    if kernels and not project:
        names = ", ".join(_short_name(k) for k in kernels[:5])
        raise KernelNotFoundError(
            f"every kernel the application launched comes from a library ({names}), so none has source "
            "in the project to diagnose",
            hint="the project's own kernels must run in this application; -k/--kernel selects among them",
        )
    if explicit:
        return project[:top_n]
    return [k for i, k in enumerate(project[:top_n]) if i == 0 or k.share >= MIN_PROFILED_SHARE]


def triton_kernel(command: list[str], top: list[RankedKernel], selected: str | None) -> RankedKernel | None:
    """The Triton kernel to profile inside: the selected kernel, else the hottest profiled one (``top``, the
    project's kernels from targets_of), when the application is a Python program and that kernel's name
    is a bare function name (a CUDA C++ kernel's demangled name carries its parameters)."""
    if not is_python_command(command):
        return None
    chosen = next((k for k in top if k.name == selected), top[0] if top else None)
    return None if chosen is None or "(" in chosen.demangled else chosen


def minor_note(shown: list[RankedKernel], targets: list[RankedKernel]) -> str | None:
    """One line for the project kernels left out of the counter pass for their small share."""
    chosen = {k.name for k in targets}
    minor = [k for k in shown if not k.library and k.name not in chosen]
    if not minor:
        return None
    names = ", ".join(_short_name(k) for k in minor[:4])
    return (
        f"{len(minor)} kernel(s) under {MIN_PROFILED_SHARE:.0%} of GPU time each ({names}) were not "
        "profiled: fixing one could save little; name it with -k/--kernel to diagnose it anyway"
    )


def library_note(shown: list[RankedKernel]) -> str | None:
    """One line for the library kernels among the top ones (instead of one warning per kernel)."""
    library = [k for k in shown if k.library]
    if not library:
        return None
    share = sum(k.share for k in library)
    names = sorted({_short_name(k) for k in library})
    return (
        f"{len(library)} of the top kernels ({share:.0%} of GPU time) come from libraries and have no source "
        f"in the project, so they are listed but not profiled: {', '.join(names[:4])}"
        + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    )


def _diagnose_kernels(
    formulas: list[Formula],
    top: list[RankedKernel],
    profiles: dict[str, KernelProfile],
    warnings: list[str],
    backend: GpuBackend,
    ws: Path,
) -> list[Diagnosis]:
    """Every formula on every profiled kernel. A kernel without source rows is still diagnosed: a formula
    that needs per-instruction counters it lacks says it could not decide (never reads them as 0). Where
    the backend counts per kernel (rocprofv3), a bottleneck points at its kernel's definition in ``ws``."""
    with_lines = [name for name, p in profiles.items() if any(r.line > 0 for r in p.source)]
    if not backend.source_lines:
        warnings.append(
            f"{backend.profiler} counts per kernel, not per instruction: a bottleneck points at its kernel's "
            "definition, not at the lines that cause it"
        )
    elif profiles and not with_lines and all(p.source_page for p in profiles.values()):
        raise NoLineInfoError(
            "the profiled kernels carry no source-line information, so bottlenecks cannot be localized",
            hint="build with -lineinfo (nvcc) or pass an -i/--instrument_command that does",
        )
    diagnoses = []
    for kernel in top:
        profile = profiles.get(kernel.name)
        if profile is None:
            warnings.append(
                f"{kernel.demangled}: no counters were collected (not profiled by {backend.profiler})"
            )
            continue
        verdicts = [formula.evaluate(profile) for formula in formulas]
        if not backend.source_lines:
            verdicts = at_kernel_definition(verdicts, ws, kernel.demangled)
        elif not profile.source_page:
            warnings.append(
                f"{kernel.demangled}: {backend.profiler}'s source page names no kernel that matches it, so "
                "it is diagnosed without source lines"
            )
        elif kernel.name not in with_lines:
            warnings.append(f"{kernel.demangled}: built without line info; diagnosed without source lines")
        diagnoses.extend(verdicts)
    return diagnoses


def project_relative(diagnoses: list[Diagnosis], *roots: Path) -> list[Diagnosis]:
    """Locations with files inside one of ``roots`` (the scratch workspace, which is gone once the
    diagnosis ends, and the project itself, where binaries built before the copy point) named relative
    to it, so to the project. Other files (CUDA headers) stay as they are."""
    relative = relative_to_roots(*roots)
    return [
        d.model_copy(
            update={
                "locations": [
                    loc.model_copy(update={"file": relative(loc.file) or loc.file}) for loc in d.locations
                ]
            }
        )
        for d in diagnoses
    ]


@dataclass(frozen=True)
class Diagnosed:
    """A diagnosis and what the optimization loop needs from it: the profiles of the top kernels and the
    device as the counter pass saw it."""

    report: Report
    profiles: dict[str, KernelProfile]


def run_diagnosis(
    spec: JobSpec,
    *,
    backend: GpuBackend,
    project: Path,
    progress: Progress | None = None,
    counter_store: CounterStore | None = None,
) -> Report:
    """The diagnosis part of a job, for its first application, in a scratch copy of ``project``."""
    settings = get_settings()
    with workspace(project, root=settings.work_dir, keep=settings.keep_workspace, reference=True) as ws:
        return diagnose_in(
            spec, backend=backend, ws=ws, project=project, progress=progress, counter_store=counter_store
        ).report


def diagnose_in(
    spec: JobSpec,
    *,
    backend: GpuBackend,
    ws: Path,
    project: Path,
    progress: Progress | None = None,
    counter_store: CounterStore | None = None,
) -> Diagnosed:
    """Build in the workspace ``ws`` (a copy of ``project``), time every kernel, count what the formulas need
    on the top ones (reusing ``counter_store``'s counters of kernels whose code and launch shapes did not
    change, and saving the new ones there), decide and localize. Raises an IntelliPerfError on bad input."""
    progress = progress or NullProgress()
    settings = get_settings()
    if len(spec.applications) != 1:
        raise SpecError("run_diagnosis takes one application; call it once per application")
    app = spec.applications[0]
    formulas = formulas_for(spec.formula)
    recorded = backend.recorded  # --replay: say what is read, not what would run
    progress.start("device", "reading the recorded device" if recorded else "looking for the GPU")
    device = backend.device()
    progress.done("device", f"{device.name} ({device.arch})" + (", as recorded" if recorded else ""))
    setup_s = None
    if (setup := backend.setup_needed()) is not None:
        progress.start("setup", setup)
        started = time.perf_counter()
        backend.setup()
        setup_s = time.perf_counter() - started
        progress.done("setup", f"{setup_s:.1f} s")
    warnings: list[str] = []
    build_command = spec.instrument_command or spec.build_command
    build_s = None
    if build_command:
        progress.start("build", build_command)
        build_s = run_build(build_command, cwd=ws, timeout_s=spec.timeouts.build_s)
        progress.done("build", f"{build_s:.1f} s")
    progress.start(
        "timing",
        "reading the recorded trace" if recorded else f"tracing every kernel launch ({backend.tracer})",
    )
    started = time.perf_counter()
    timing = backend.time_kernels(app.command, cwd=ws, timeout_s=spec.timeouts.run_s)
    timing_s = time.perf_counter() - started
    ranked = compiled_elsewhere(rank_kernels(timing.kernels), ws)
    matched = filter_kernels(ranked, spec.kernel)
    top = targets_of(matched, spec.top_n, explicit=spec.kernel is not None)
    shown = sorted({k.name: k for k in [*matched[: spec.top_n], *top]}.values(), key=lambda k: k.rank)
    warnings.extend(note for note in (library_note(shown), minor_note(shown, top)) if note)
    progress.done("timing", f"{len(ranked)} kernels, {sum(k.launches for k in ranked)} launches")
    metrics = metrics_for(formulas)
    reused, notes = (counter_store or CounterStore(None, None)).find(
        top, device=device, quantities=metrics, ws=ws
    )
    warnings.extend(notes)
    for kept in reused.values():
        where = f"commit {kept.record.commit}" if kept.record.commit else "an earlier run"
        warnings.append(
            f"{kept.profile.demangled}: counters reused from {where} (same code hash {kept.record.code_hash} "
            f"and launch shapes on {device.name}): not profiled again"
        )
    to_profile = [k for k in top if k.name not in reused]
    profiles: dict[str, KernelProfile] = {}
    counters_s = None
    if to_profile:
        what = f"the recorded {backend.profiler} counters of" if recorded else f"{backend.profiler} on"
        source = " + source" if backend.source_lines else ""
        reusing = f" ({len(reused)} reused)" if reused else ""
        progress.start(
            "counters", f"{what} {len(to_profile)} kernel(s){reusing}, {len(metrics)} quantities{source}"
        )
        started = time.perf_counter()
        profiles = dict(
            backend.collect(
                app.command,
                cwd=ws,
                kernels=to_profile,
                metrics=metrics,
                timeout_s=settings.counters_timeout_s,
            )
        )
        counters_s = time.perf_counter() - started
        warnings.extend(backend.take_notes())
        if not profiles:
            raise ProfileError(
                f"{backend.profiler}'s report holds none of the top kernels",
                hint=f"the kernels {backend.profiler} profiled could not be matched to the traced ones; "
                "use -k",
            )
        named = device  # the key names the device as the timing pass saw it, as the next lookup will
        device = backend.device()  # the counter pass adds what the profiler knows (SM count, L2 size)
        if counter_store is not None:
            try:
                counter_store.save(
                    profiles,
                    to_profile,
                    device=device,
                    key_device=named,
                    quantities=metrics,
                    ws=ws,
                    project=project,
                    counters_s=counters_s,
                )
            except OSError as error:  # the diagnosis stands; only later runs lose the reuse
                warnings.append(f"the counters could not be kept in {counter_store.write}: {error}")
        progress.done("counters", f"{counters_s:.1f} s")
    else:
        device = next(iter(reused.values())).device
        progress.note(f"counters: all {len(reused)} kernel(s) reused; the counter pass did not run")
    profiles.update({name: kept.profile for name, kept in reused.items()})
    progress.start("diagnose", ", ".join(f.name for f in formulas))
    diagnoses = project_relative(
        _diagnose_kernels(formulas, top, profiles, warnings, backend, ws), ws, project
    )
    selection = select(spec.formula, shown, diagnoses)
    found = sum(d.present for d in diagnoses)
    progress.done("diagnose", f"{found} bottleneck(s) found")
    intra_kernel, regions_s = None, None
    triton = triton_kernel(app.command, top, selection.kernel if selection else None)
    if triton is not None:
        progress.start("regions", f"Proton: cycles per region of {triton.demangled}")
        started = time.perf_counter()
        try:
            intra_kernel = backend.intra_kernel(
                app.command, cwd=ws, kernel=triton, timeout_s=spec.timeouts.run_s
            )
        except ProfileError as error:
            warnings.append(f"no intra-kernel profile of {triton.demangled}: {error.message}")
            progress.done("regions", "not available")
        else:
            progress.done("regions", f"{len(intra_kernel.regions)} region(s)")
        regions_s = time.perf_counter() - started
    report = Report(
        intelliperf_version=__version__,
        device=device,
        application=list(app.command),
        project_directory=str(project),
        formula_requested=spec.formula,
        kernels=shown,
        diagnoses=diagnoses,
        selected=selection,
        passes=PassTimings(
            setup_s=setup_s,
            build_s=build_s,
            timing_s=timing_s,
            counters_s=counters_s,
            counters_saved_s=round(sum(k.record.saved_s for k in reused.values()), 3) if reused else None,
            regions_s=regions_s,
        ),
        reused_counters=[reused[k.name].record for k in top if k.name in reused],
        intra_kernel=intra_kernel,
        warnings=warnings,
    )
    return Diagnosed(report=report, profiles=profiles)

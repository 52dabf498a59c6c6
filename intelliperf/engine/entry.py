"""The one way into the engine: a `JobSpec` and a project in, a `Report` out.

`intelliperf run` (the CLI) and `worker.engine_main` (a job on a GPU node) both call `run_spec`; what they
add is only how they show progress and where they write the report. Everything a job needs that can be
checked before the GPU is touched is checked here, in this order: one application per call, a build command
for the loop, the model's credentials, and a recorded profile that can be read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from intelliperf.contract import JobSpec, Report
from intelliperf.engine.counter_store import CounterStore
from intelliperf.engine.job import check_optimizable, run_job
from intelliperf.engine.progress import Progress
from intelliperf.errors import ProfileError, SpecError
from intelliperf.gpu.backend import GpuBackend
from intelliperf.spec_checks import check_spec

__all__ = ["REPLAY_DIAGNOSES_ONLY", "run_spec"]

REPLAY_DIAGNOSES_ONLY = (
    "the optimization loop validates rewrites on the GPU: a replayed profile is diagnosed only"
)


REPLAY_HINT = (
    "every example ships one, e.g. --replay tests/fixtures/gpu/transpose_bank/original; the GPU tests record "
    "them (tests/fixtures/gpu/README.md)"
)


def _replayed(replay: Path, *, loop: bool) -> tuple[GpuBackend, dict[str, Any]]:
    """The backend (and, for a recorded loop, the judge) that read a recording instead of the GPU."""
    from intelliperf.engine.recorded_loop import CandidateCounters, RecordedJudge
    from intelliperf.gpu.select import backend_for

    if loop:
        return CandidateCounters(replay / "original", replay / "fixed"), {
            "judge_factory": RecordedJudge.factory(replay)
        }
    try:
        return backend_for(replay), {}
    except ProfileError as error:  # the folder holds no recording
        raise SpecError(f"replay: {error.message}", hint=REPLAY_HINT) from None


def run_spec(
    spec: JobSpec,
    project: Path,
    *,
    progress: Progress | None = None,
    replay: Path | None = None,
    record: Path | None = None,
    reproducer_dir: Path | None = None,
    counter_store: CounterStore | None = None,
) -> Report:
    """Diagnose ``spec``'s application in a copy of ``project`` and, where the spec optimizes, run the loop.

    ``replay`` reads a profile recorded on a GPU machine instead of the GPU: diagnosis only, unless the folder
    is a recording of the loop itself (`intelliperf.engine.recorded_loop`), whose verdicts are then replayed.
    ``record`` keeps every GPU export there (fixtures); ``reproducer_dir`` receives the best candidate's
    reproducer (``intelliperf replay``); ``counter_store`` reuses the counters of kernels whose code did not
    change and keeps the new ones (`intelliperf.engine.counter_store`). Raises an IntelliPerfError for bad
    input, before any work where it can be found before."""
    from intelliperf.engine.recorded_loop import is_loop_recording

    if len(spec.applications) != 1:
        raise SpecError(
            f"a job runs one application at a time; this spec has {len(spec.applications)}",
            hint="run each with JobSpec.for_application(app), which also applies its own overrides",
        )
    check_spec(spec)
    replayed_loop = replay is not None and is_loop_recording(replay)
    optimize = spec.optimizes and (replay is None or replayed_loop)
    proposer = None
    if optimize:
        from intelliperf.llm.client import check_credentials
        from intelliperf.llm.proposer import DspyProposer

        check_optimizable(spec)
        check_credentials(spec.llm)
        proposer = DspyProposer(spec.llm)
    if replay is not None:
        backend, extra = _replayed(replay, loop=replayed_loop)
    else:
        from intelliperf.gpu.select import backend_for

        backend, extra = backend_for(record=record, vendor=spec.gpu.vendor), {}
    if replayed_loop and progress is not None:
        progress.note(f"replaying the GPU's verdicts and counters recorded in {replay}")
    report = run_job(
        spec,
        backend=backend,
        project=project,
        proposer=proposer,
        progress=progress,
        reproducer_dir=reproducer_dir,
        counter_store=counter_store,
        **extra,
    )
    if spec.optimizes and not optimize:
        report = report.model_copy(update={"warnings": [*report.warnings, REPLAY_DIAGNOSES_ONLY]})
    return report

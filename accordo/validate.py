"""Accordo's entry point: is the candidate correct, and how much faster is it?

    result = validate("block_sum", ["bin/ref"], ["bin/candidate"], cwd="examples/accordo_cases")
    result.passed, result.failure, result.reason, result.speedup

The reference runs ``calibration_runs`` times under buffer capture; when those runs disagree anywhere,
it runs again up to ``noise_runs`` runs in all, so that the noise bound of ``accordo.compare`` rests on a
stable estimate of its spread (unless the captures would pass ``noise_capture_bytes``). The candidate
runs twice under capture: once with each launch's inputs restored from the reference's first run, so
that every launch is judged in isolation on the reference's own inputs, and once as it is, end to end
(``accordo.compare``); a correct candidate is then timed against the reference (``accordo.speedup``).
Both then run twice more with their buffers set before every launch (``accordo.probes``): outputs full
of NaN, and fresh inputs with outputs full of random bytes; a candidate that relied on what memory held
or on the one input the program makes fails there, and ``ValidationResult.checks`` says which check ran
and which failed. The candidate may crash, hang or launch nothing: those are verdicts, not exceptions.
Problems with the reference itself raise (AppError, KernelNotFoundError, ValidationError), since nothing
can be judged against it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from intelliperf.contract.report import JudgeCheck, Speedup, ValidationResult
from intelliperf.errors import AppError, KernelNotFoundError, tail

from .capture import Capture, CaptureBudgetError, CaptureRun, read_capture, run_capture, write_restore
from .capture_writer import write_capture
from .compare import (
    DEFAULT_ALPHA,
    Comparison,
    combine,
    compare_captures,
    compare_end_to_end,
    reference_disagrees,
    written_params,
)
from .probes import PROBES, Probe, overwritten, snapshots, write_probe
from .replay_check import (
    REPLAY_SECONDS,
    ReplayFailure,
    launch_pattern_problem,
    replay_capture,
    replay_speedups,
    speedups_disagree,
)
from .reproducer import save_reproducer
from .signature import ELEMENT_TYPES, kernel_pattern
from .speedup import TIMERS, RunSeen, Timer, measure_speedup
from .timed_launches import timed_launches_check
from .timing import TimedLaunch

__all__ = [
    "Reference",
    "ValidationOptions",
    "capture_reference",
    "check_candidate",
    "judge_timing",
    "time_candidate",
    "validate",
]

REFERENCE_FILE = "reference.bin"  # in check_candidate's workdir: the reference's first capture
CANDIDATE_FILE = "candidate.bin"  # and the candidate's capture on the reference's inputs


@dataclass(frozen=True)
class ValidationOptions:
    atol: float = 1e-6
    rtol: float = 1e-5
    calibration_runs: int = 3
    noise_runs: int = 24  # reference runs in all when the first calibration_runs disagree
    noise_capture_bytes: int = 16 << 30  # no further noise runs once the captures would exceed this
    alpha: float = DEFAULT_ALPHA  # per output: how often another run of the reference would fail
    runs: int = 10  # timing runs per side, at most
    min_runs: int | None = None  # stop timing here once the interval excludes 1 (None: always ``runs``)
    timeout_s: float = 120.0  # per application run
    element_type: str = "auto"  # or one of accordo.signature.ELEMENT_TYPES
    default_element: str = "float32"  # when the kernel name carries no signature
    measure: bool = True
    max_bytes: int | None = None  # cap per snapshot (the profiler's max_bytes)
    capture_budget_bytes: int | None = None  # bound on a capture's snapshots (None: the library's 8 GiB)
    timer: Timer = "events"  # kernel-time instrument for the speedup (accordo.speedup says why)
    warmup_launches: int = 1  # first launches of the kernel per run left out of the speedup
    probes: bool = True  # run the reference and candidates on NaN-filled outputs and fresh inputs
    probe_seed: int = 0  # the fresh inputs' shuffle and random bytes
    replay: bool = True  # replay both kernels alone on the captured inputs: judge and time them there
    replay_seconds: float = REPLAY_SECONDS  # the replay timer's loop
    revalidate: bool = True  # judge each launch again after timing

    def __post_init__(self) -> None:
        if self.atol < 0 or self.rtol < 0:
            raise ValueError("atol and rtol must be >= 0")
        if self.calibration_runs < 1:
            raise ValueError("calibration_runs must be at least 1")
        if self.noise_runs < 2:
            raise ValueError("noise_runs must be at least 2")
        if not 0.0 < self.alpha < 0.5:
            raise ValueError("alpha must be between 0 and 0.5")
        if self.measure and self.runs < 2:
            raise ValueError("runs must be at least 2 to give an interval")
        if self.min_runs is not None and not 2 <= self.min_runs <= self.runs:
            raise ValueError("min_runs must be between 2 and runs")
        if self.timeout_s <= 0:
            raise ValueError("timeout_s must be positive")
        if self.warmup_launches < 0:
            raise ValueError("warmup_launches must not be negative")
        if self.timer not in TIMERS:
            raise ValueError(f"unknown timer {self.timer!r}; one of: {', '.join(TIMERS)}")
        for name, allowed in (
            (self.element_type, {"auto", *ELEMENT_TYPES}),
            (self.default_element, ELEMENT_TYPES),
        ):
            if name not in allowed:
                raise ValueError(f"unknown element type {name!r}; one of: {', '.join(sorted(allowed))}")

    @property
    def bounds(self) -> dict[str, float | int]:
        """The bounds every ValidationResult reports."""
        return {"atol": self.atol, "rtol": self.rtol, "alpha": self.alpha}


def _candidate_failure(kernel: str, run: CaptureRun, options: ValidationOptions) -> ValidationResult | None:
    if run.status == "ok":
        return None
    failure = "timeout" if run.status == "timeout" else "crash"
    captured = len(run.capture.launches) if run.capture is not None else 0
    reason = f"the candidate {run.message}"
    if failure == "crash" and run.stderr_tail.strip():
        reason += f"; its stderr ends with: {tail(run.stderr, 5).strip()}"
    reason += f" ({captured} launch{'es' if captured != 1 else ''} of the kernel captured before that)"
    return ValidationResult(
        kernel=kernel,
        passed=False,
        failure=failure,
        reason=reason,
        candidate_stderr_tail=run.stderr_tail or None,
        **options.bounds,
    )


@dataclass(frozen=True)
class ReferenceProbe:
    """The reference's runs under one probe (``accordo.probes``), or why the probe cannot run."""

    probe: Probe
    captures: tuple[Capture, ...] = ()
    skipped: str | None = None


@dataclass(frozen=True)
class Reference:
    """The reference's calibration captures for one kernel: taken once, compared with every candidate.
    The captures stay readable (memory maps) after their files are gone. Candidates run with the same
    environment and capture library as the reference did."""

    kernel: str
    command: tuple[str, ...]
    cwd: Path | None
    captures: tuple[Capture, ...]
    wall_s: tuple[float, ...] = ()  # each capture run's wall time
    env: Mapping[str, str] | None = None
    library: str | Path | None = None
    probes: tuple[ReferenceProbe, ...] = ()

    def candidate_timeout(self, limit_s: float, *, factor: float = 10.0, floor_s: float = 30.0) -> float:
        """How long a candidate run may take: ``factor`` times the slowest reference capture run (at least
        ``floor_s``), never more than ``limit_s``. A rewrite that hangs is then stopped in proportion to
        the application, not after the job's whole run timeout."""
        slowest = max(self.wall_s, default=0.0)
        return min(limit_s, max(floor_s, factor * slowest))


def capture_reference(
    kernel: str,
    reference: Sequence[str],
    *,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    options: ValidationOptions | None = None,
    progress: Callable[[str], None] | None = None,
    keep_captures: str | Path | None = None,
    library: str | Path | None = None,
) -> Reference:
    """Run the reference ``options.calibration_runs`` times under buffer capture, and when those runs
    disagree, again up to ``options.noise_runs`` runs in all (within ``options.noise_capture_bytes``). A
    reference that crashes, hangs or never launches the kernel raises: nothing can be judged against it."""
    options = options or ValidationOptions()
    say = progress or (lambda _message: None)
    captures: list[Capture] = []
    walls: list[float] = []

    def capture_once(total: int) -> None:
        say(f"capturing the reference ({len(captures) + 1}/{total})")
        run = run_capture(
            reference,
            cwd=cwd,
            output_dir=_output_dir(keep_captures, f"reference-{len(captures) + 1}"),
            **_capture_settings(kernel, env, options, library),
        )
        if run.status != "ok" or run.capture is None:
            raise AppError(
                f"the reference {run.message}; nothing can be validated against it",
                log_tail=run.stderr_tail or None,
            )
        captures.append(run.capture)
        walls.append(run.wall_s)

    for _ in range(options.calibration_runs):
        capture_once(options.calibration_runs)
    noisy = len(captures) > 1 and options.noise_runs > len(captures) and reference_disagrees(captures)
    disagrees = noisy or (len(captures) > 1 and reference_disagrees(captures))
    if noisy:
        per_run = max(c.file_bytes for c in captures)
        affordable = max(len(captures), options.noise_capture_bytes // max(per_run, 1))
        total = min(options.noise_runs, affordable)
        say(
            f"the reference's runs disagree: measuring its noise over {total} runs"
            + (
                f" ({options.noise_runs} wanted; {per_run / 2**30:.2f} GiB of captures per run)"
                if total < options.noise_runs
                else ""
            )
        )
        while len(captures) < total:
            capture_once(total)
    probes: tuple[ReferenceProbe, ...] = ()
    if options.probes:
        runs = min(3, len(captures)) if disagrees else 1
        probes = _probe_reference(kernel, reference, cwd, env, options, library, tuple(captures), runs, say)
    return Reference(
        kernel=kernel,
        command=tuple(reference),
        cwd=Path(cwd) if cwd is not None else None,
        captures=tuple(captures),
        wall_s=tuple(walls),
        env=env,
        library=library,
        probes=probes,
    )


def _probe_reference(
    kernel: str,
    reference: Sequence[str],
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    options: ValidationOptions,
    library: str | Path | None,
    captures: tuple[Capture, ...],
    runs: int,
    say: Callable[[str], None],
) -> tuple[ReferenceProbe, ...]:
    """The reference under each probe: ``runs`` captures each (more than one when its runs disagree, to
    calibrate the noise), or why the probe is skipped."""
    original = captures[0]
    written = written_params(captures)
    outputs = snapshots(original, written)
    settings = _capture_settings(kernel, env, options, library)

    def run_with(folder: Path, what: str) -> tuple[Capture, ...] | str:
        taken = []
        for number in range(runs):
            say(f"capturing the reference {what} ({number + 1}/{runs})")
            run = run_capture(reference, cwd=cwd, restore=folder, **settings)
            if run.status != "ok" or run.capture is None:
                return f"the reference itself {run.message} {what}"
            if run.capture.errors or any(launch.errors for launch in run.capture.launches):
                return "its buffers could not be set before every launch"
            taken.append(run.capture)
        return tuple(taken)

    nan, fresh = PROBES
    with tempfile.TemporaryDirectory(prefix="accordo-probe-") as scratch:
        whole: set[tuple[int, int]] = set()
        if outputs:
            folder, _ = write_probe(original, Path(scratch) / "nan-all", "prefilled_nan", outputs=outputs)
            tried = run_with(folder, nan.what)
            if isinstance(tried, str):
                return (ReferenceProbe(nan, skipped=tried), ReferenceProbe(fresh, skipped=tried))
            whole = overwritten(original, tried[0], outputs)
        results = []
        if not whole:
            results.append(ReferenceProbe(nan, skipped="the kernel overwrites no output whole"))
        elif whole == outputs:
            results.append(ReferenceProbe(nan, captures=tried))
        else:
            folder, _ = write_probe(original, Path(scratch) / "nan", "prefilled_nan", outputs=whole)
            taken = run_with(folder, nan.what)
            results.append(_probe_of(nan, taken))
        inputs = snapshots(original, written, of=False)
        folder, changed = write_probe(
            original,
            Path(scratch) / "fresh",
            "fresh_inputs",
            outputs=whole,
            inputs=inputs,
            seed=options.probe_seed,
        )
        if not changed:
            skipped = "the kernel overwrites no output whole and reads no floating-point input"
            results.append(ReferenceProbe(fresh, skipped=skipped))
        else:
            taken = run_with(folder, fresh.what)
            results.append(_probe_of(fresh, taken))
    return tuple(results)


def _probe_of(probe: Probe, taken: tuple[Capture, ...] | str) -> ReferenceProbe:
    if isinstance(taken, str):
        return ReferenceProbe(probe, skipped=taken)
    return ReferenceProbe(probe, captures=taken)


def _output_dir(keep_captures: str | Path | None, name: str) -> Path | None:
    return Path(keep_captures) / name if keep_captures is not None else None


def _capture_settings(
    kernel: str, env: Mapping[str, str] | None, options: ValidationOptions, library: str | Path | None
) -> dict[str, object]:
    return {
        "kernel_regex": kernel_pattern(kernel),
        "env": env,
        "timeout_s": options.timeout_s,
        "max_bytes": options.max_bytes,
        "budget_bytes": options.capture_budget_bytes,
        "library": library,
    }


def _capture_candidate(
    reference: Reference,
    candidate: Sequence[str],
    *,
    cwd: str | Path | None,
    options: ValidationOptions,
    output_dir: Path | None,
    restore: Path | None,
) -> CaptureRun | ValidationResult:
    """One capture run of the candidate, or the verdict when it crashed, hung or never launched the kernel."""
    kernel = reference.kernel
    try:
        run = run_capture(
            candidate,
            cwd=cwd,
            output_dir=output_dir,
            restore=restore,
            **_capture_settings(kernel, reference.env, options, reference.library),
        )
    except KernelNotFoundError:
        return ValidationResult(
            kernel=kernel,
            passed=False,
            failure="no_launch",
            reason=f"the candidate ran to completion but never launched a kernel matching {kernel!r}",
            **options.bounds,
        )
    except CaptureBudgetError as exc:
        return ValidationResult(
            kernel=kernel,
            passed=False,
            failure="over_budget",
            reason=f"the candidate's kernel reads more than the reference's fit in: {exc.message}",
            **options.bounds,
        )
    return _candidate_failure(kernel, run, options) or run


def _with_check(result: ValidationResult, checks: list[JudgeCheck], name: str) -> ValidationResult:
    """``result`` (a failure) with the checks that passed and ``name``, which failed with its reason."""
    done = [*checks, JudgeCheck(name=name, outcome="failed", detail=result.reason)]  # type: ignore[arg-type]
    return result.model_copy(update={"checks": done})


def _isolated(
    reference: Reference,
    candidate: Sequence[str],
    *,
    cwd: str | Path | None,
    options: ValidationOptions,
    output_dir: Path | None,
) -> tuple[CaptureRun | ValidationResult, Comparison | None]:
    """The candidate captured with each launch's inputs restored from the reference's first run, and its
    launches compared with the reference's."""
    with tempfile.TemporaryDirectory(prefix="accordo-restore-") as scratch:
        restore = write_restore(reference.captures[0], Path(scratch) / "inputs")
        run = _capture_candidate(
            reference, candidate, cwd=cwd, options=options, output_dir=output_dir, restore=restore
        )
    if isinstance(run, ValidationResult):
        return run, None
    assert run.capture is not None
    return run, compare_captures(list(reference.captures), run.capture, **_compare_settings(options))


def check_candidate(
    reference: Reference,
    candidate: Sequence[str],
    *,
    cwd: str | Path | None = None,
    options: ValidationOptions | None = None,
    progress: Callable[[str], None] | None = None,
    keep_captures: str | Path | None = None,
    workdir: str | Path | None = None,
) -> ValidationResult:
    """Capture the candidate end to end, and again with each launch's inputs restored from the reference's
    first run, and compare both with the reference's captures; then, if it passed, under each of the
    reference's probes, its launch pattern against the reference's, and its kernel replayed alone on the
    captured inputs (no timing). The first check that fails decides. ``workdir`` keeps the two captures a
    replay timing needs (``REFERENCE_FILE``, ``CANDIDATE_FILE``: ``judge_timing``)."""
    options = options or ValidationOptions()
    say = progress or (lambda _message: None)
    kernel = reference.kernel
    checks: list[JudgeCheck] = []

    say("capturing the candidate")
    end_to_end = _capture_candidate(
        reference,
        candidate,
        cwd=cwd,
        options=options,
        output_dir=_output_dir(keep_captures, "candidate"),
        restore=None,
    )
    if isinstance(end_to_end, ValidationResult):
        return _with_check(end_to_end, checks, "end_to_end")
    say("capturing the candidate on the reference's inputs, launch by launch")
    isolated, by_launch = _isolated(
        reference,
        candidate,
        cwd=cwd,
        options=options,
        output_dir=_output_dir(keep_captures, "candidate-isolated"),
    )
    if isinstance(isolated, ValidationResult) or by_launch is None:
        assert isinstance(isolated, ValidationResult)
        return _with_check(isolated, checks, "isolated")

    say("comparing buffers")
    references = list(reference.captures)
    assert isolated.capture is not None and end_to_end.capture is not None
    whole = compare_end_to_end(references, end_to_end.capture, **_compare_settings(options))
    comparison = combine(by_launch, whole)
    result = _result(kernel, comparison, len(reference.captures), options)
    if not comparison.passed:
        return _with_check(
            result, checks, "isolated" if comparison.reason == by_launch.reason else "end_to_end"
        )
    checks += [JudgeCheck(name="end_to_end", outcome="passed"), JudgeCheck(name="isolated", outcome="passed")]

    for probe in reference.probes:
        name = probe.probe.name
        if probe.skipped is not None:
            checks.append(JudgeCheck(name=name, outcome="skipped", detail=probe.skipped))
            continue
        with tempfile.TemporaryDirectory(prefix="accordo-probe-") as scratch:
            folder = write_restore(probe.captures[0], Path(scratch) / "inputs")
            say(f"capturing the candidate {probe.probe.what}")
            run = _capture_candidate(
                reference, candidate, cwd=cwd, options=options, output_dir=None, restore=folder
            )
        if isinstance(run, ValidationResult):
            return _with_check(_probe_result(run, probe.probe), checks, name)
        assert run.capture is not None
        probed = compare_captures(list(probe.captures), run.capture, **_compare_settings(options))
        if not probed.passed:
            verdict = _result(kernel, probed, len(reference.captures), options)
            return _with_check(_probe_result(verdict, probe.probe), checks, name)
        checks.append(JudgeCheck(name=name, outcome="passed"))

    pattern = launch_pattern_problem(reference.captures[0], end_to_end.capture)
    if pattern is not None:
        failed = ValidationResult(
            kernel=kernel, passed=False, failure="launch_pattern", reason=pattern, **options.bounds
        )
        return _with_check(failed, checks, "launch_pattern")
    checks.append(JudgeCheck(name="launch_pattern", outcome="passed"))

    if options.replay:
        with tempfile.TemporaryDirectory(prefix="accordo-replay-") as own:
            work = Path(workdir) if workdir is not None else Path(own)
            replayed = _replay_check(reference, isolated.capture, work, options, say)
        if isinstance(replayed, ValidationResult):
            return _with_check(replayed, checks, "replay")
        checks.append(replayed)
    return result.model_copy(update={"checks": checks})


def _replay_check(
    reference: Reference,
    isolated: Capture,
    work: Path,
    options: ValidationOptions,
    say: Callable[[str], None],
) -> JudgeCheck | ValidationResult:
    """The candidate's kernel replayed alone on the reference's inputs must write the reference's outputs:
    a failed verdict if it does not, the check (passed, or skipped with why) otherwise. Skipped when the
    reference's own kernel, replayed, does not reproduce its capture (it reads memory no parameter reaches,
    such as a module variable the program set)."""
    say("replaying the reference's and the candidate's kernels alone on the captured inputs")
    work.mkdir(parents=True, exist_ok=True)
    first = reference.captures[0]
    ref_file = write_capture(first, work / REFERENCE_FILE)
    cand_file = write_capture(isolated, work / CANDIDATE_FILE)
    own = replay_capture(ref_file, work / "reference-replayed.bin", timeout_s=options.timeout_s)
    if isinstance(own, ReplayFailure):
        return JudgeCheck(name="replay", outcome="skipped", detail=f"the reference's kernel: {own.message}")
    reproduced = compare_captures([first], own, **_compare_settings(options))
    if not reproduced.passed:
        detail = (
            f"replayed alone, the reference's kernel does not reproduce its own capture: {reproduced.reason}"
        )
        return JudgeCheck(name="replay", outcome="skipped", detail=detail)
    replayed = replay_capture(cand_file, work / "candidate-replayed.bin", timeout_s=options.timeout_s)
    if isinstance(replayed, ReplayFailure):
        if replayed.kind == "problem":
            return JudgeCheck(
                name="replay", outcome="skipped", detail=f"the candidate's kernel: {replayed.message}"
            )
        reason = (
            f"replayed alone on the reference's inputs, the candidate's kernel failed: {replayed.message}"
        )
        return ValidationResult(
            kernel=reference.kernel, passed=False, failure="crash", reason=reason, **options.bounds
        )
    compared = compare_captures(list(reference.captures), replayed, **_compare_settings(options))
    if not compared.passed:
        verdict = _result(reference.kernel, compared, len(reference.captures), options)
        reason = f"replayed alone on the reference's inputs, the candidate's kernel: {compared.reason}"
        return verdict.model_copy(update={"reason": reason})
    return JudgeCheck(name="replay", outcome="passed")


def _compare_settings(options: ValidationOptions) -> dict[str, object]:
    return {
        "atol": options.atol,
        "rtol": options.rtol,
        "default_element": options.default_element,
        "element_override": None if options.element_type == "auto" else options.element_type,
        "alpha": options.alpha,
    }


def _result(
    kernel: str, comparison: Comparison, calibration_runs: int, options: ValidationOptions
) -> ValidationResult:
    return ValidationResult(
        kernel=kernel,
        passed=comparison.passed,
        failure=comparison.failure,  # type: ignore[arg-type]
        reason=comparison.reason,
        launches_compared=comparison.launches_compared,
        launches=comparison.launches,
        noise_max=comparison.noise_max,
        bound_use=comparison.bound_use,
        calibration_runs=calibration_runs,
        **options.bounds,
    )


def _probe_result(result: ValidationResult, probe: Probe) -> ValidationResult:
    """``result`` of a run under ``probe``, its reason saying so: the reference passed that run."""
    return result.model_copy(update={"reason": f"run {probe.what}: {result.reason}"})


def time_candidate(
    reference: Reference,
    candidate: Sequence[str],
    *,
    cwd: str | Path | None = None,
    options: ValidationOptions | None = None,
    progress: Callable[[str], None] | None = None,
    seen: RunSeen | None = None,
) -> Speedup:
    """The candidate's speedup over the reference: interleaved timed runs (``accordo.speedup``); ``seen``
    is told each run's launches as the timer recorded them."""
    options = options or ValidationOptions()
    say = progress or (lambda _message: None)
    say(f"timing reference and candidate, up to {options.runs} runs each, interleaved")
    return measure_speedup(
        reference.command,
        candidate,
        kernel_regex=kernel_pattern(reference.kernel),
        runs=options.runs,
        min_runs=options.min_runs,
        timeout_s=options.timeout_s,
        reference_cwd=reference.cwd,
        candidate_cwd=cwd,
        env=reference.env,
        library=reference.library,
        progress=say,
        timer=options.timer,
        warmup_launches=options.warmup_launches,
        seen=seen,
    )


def judge_timing(
    reference: Reference,
    candidate: Sequence[str],
    checked: ValidationResult,
    *,
    cwd: str | Path | None = None,
    options: ValidationOptions | None = None,
    progress: Callable[[str], None] | None = None,
    workdir: str | Path | None = None,
    reproducer_dir: str | Path | None = None,
) -> ValidationResult:
    """Time a candidate that ``check_candidate`` passed, in the application (``time_candidate``). Then judge
    each launch once more (``revalidated``): a program that behaves differently once it has been timed
    fails there; and compare what its timed launches asked for with that capture (``timed_launches``): a
    program that does less work when timed than when captured fails there. Then, when its kernel was
    replayed (``workdir`` from that check), time both kernels alone on one captured launch; the two
    speedups must agree within ``AGREEMENT`` (``timing_agreement``). With ``reproducer_dir`` the replayed
    launch is saved there as a reproducer (``intelliperf replay``)."""
    options = options or ValidationOptions()
    say = progress or (lambda _message: None)
    timed_runs: list[Sequence[TimedLaunch]] = []

    def seen(side: str, launches: Sequence[TimedLaunch]) -> None:
        if side == "candidate":
            timed_runs.append(launches)

    speedup = time_candidate(reference, candidate, cwd=cwd, options=options, progress=say, seen=seen)
    result = checked.model_copy(update={"speedup": speedup})
    checks = list(checked.checks)
    if options.revalidate:
        say("judging each launch once more, after timing")
        again, comparison = _isolated(reference, candidate, cwd=cwd, options=options, output_dir=None)
        if isinstance(again, ValidationResult):
            return _with_check(_after_timing(again), checks, "revalidated")
        assert comparison is not None and again.capture is not None
        if not comparison.passed:
            verdict = _result(reference.kernel, comparison, len(reference.captures), options)
            return _with_check(_after_timing(verdict), checks, "revalidated")
        checks.append(JudgeCheck(name="revalidated", outcome="passed"))
        captures = [again.capture]
        if workdir is not None and (Path(workdir) / CANDIDATE_FILE).is_file():
            captures.append(read_capture(Path(workdir) / CANDIDATE_FILE))  # check_candidate's, for stability
        launched = timed_launches_check(captures, timed_runs)
        if launched.outcome == "failed":
            failed = result.model_copy(
                update={"passed": False, "failure": "timed_launches", "reason": launched.detail}
            )
            return _with_check(failed, checks, "timed_launches")
        checks.append(launched)
    else:
        checks.append(
            JudgeCheck(
                name="timed_launches", outcome="skipped", detail="the candidate was not captured after timing"
            )
        )
    replayed = any(c.name == "replay" and c.outcome == "passed" for c in checks) and workdir is not None
    if not replayed:
        checks.append(
            JudgeCheck(name="timing_agreement", outcome="skipped", detail="the kernels were not replayed")
        )
        return result.model_copy(update={"checks": checks})
    work = Path(str(workdir))
    say("timing both kernels alone: one captured launch replayed, with and without L2 flushed")
    timed = replay_speedups(
        work / REFERENCE_FILE,
        work / CANDIDATE_FILE,
        timeout_s=options.timeout_s,
        seconds=options.replay_seconds,
    )
    if isinstance(timed, ReplayFailure):
        checks.append(JudgeCheck(name="timing_agreement", outcome="skipped", detail=timed.message))
        return result.model_copy(update={"checks": checks})
    result = result.model_copy(update={"isolated_speedup": timed.cold, "isolated_speedup_warm": timed.warm})
    if speedups_disagree(speedup.median, timed.cold.median, timed.warm.median):
        reason = (
            f"in the application the candidate is {speedup.median:.2f}x as fast as the reference, "
            f"its kernel alone on the captured launch {timed.cold.median:.2f}x with L2 flushed and "
            f"{timed.warm.median:.2f}x with L2 warm: more than 2x from both, so the program does "
            "something when it is timed that its kernel does not explain"
        )
        failed = result.model_copy(
            update={"passed": False, "failure": "timing_disagreement", "reason": reason}
        )
        return _with_check(failed, checks, "timing_agreement")
    checks.append(JudgeCheck(name="timing_agreement", outcome="passed"))
    if reproducer_dir is not None:
        folder = save_reproducer(
            Path(reproducer_dir),
            work / REFERENCE_FILE,
            work / CANDIDATE_FILE,
            kernel=reference.kernel,
            launch=timed.launch,
            settings=_compare_settings(options),
            outputs=written_params(reference.captures),
        )
        result = result.model_copy(update={"reproducer": str(folder)})
    return result.model_copy(update={"checks": checks})


def _after_timing(result: ValidationResult) -> ValidationResult:
    return result.model_copy(update={"reason": f"judged again after timing: {result.reason}"})


def validate(
    kernel: str,
    reference: Sequence[str],
    candidate: Sequence[str],
    *,
    cwd: str | Path | None = None,
    reference_cwd: str | Path | None = None,
    candidate_cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    options: ValidationOptions | None = None,
    progress: Callable[[str], None] | None = None,
    keep_captures: str | Path | None = None,
    library: str | Path | None = None,
    reproducer_dir: str | Path | None = None,
) -> ValidationResult:
    """Validate ``candidate`` against ``reference`` for the launches of ``kernel`` (a name, a mangled
    name or a regex; see ``accordo.signature.kernel_pattern``), then time both if it is correct.

    ``cwd`` is the working directory of both commands unless ``reference_cwd``/``candidate_cwd`` say
    otherwise. ``keep_captures`` keeps the capture files (``reference-<i>/``, ``candidate/``) there;
    ``reproducer_dir``, a reproducer of the timed launch (``judge_timing``).
    """
    options = options or ValidationOptions()
    ref = capture_reference(
        kernel,
        reference,
        cwd=reference_cwd if reference_cwd is not None else cwd,
        env=env,
        options=options,
        progress=progress,
        keep_captures=keep_captures,
        library=library,
    )
    cand_cwd = candidate_cwd if candidate_cwd is not None else cwd
    with tempfile.TemporaryDirectory(prefix="accordo-judge-") as work:
        result = check_candidate(
            ref,
            candidate,
            cwd=cand_cwd,
            options=options,
            progress=progress,
            keep_captures=keep_captures,
            workdir=work,
        )
        if not result.passed or not options.measure:
            return result
        return judge_timing(
            ref,
            candidate,
            result,
            cwd=cand_cwd,
            options=options,
            progress=progress,
            workdir=work,
            reproducer_dir=reproducer_dir,
        )

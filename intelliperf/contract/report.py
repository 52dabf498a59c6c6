"""The report: what was found, what was tried, what was proven. Written by the engine, read by everyone."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

__all__ = [
    "LAUNCH_DURATIONS_KEPT",
    "REPORT_VERSION",
    "Attempt",
    "AttemptStatus",
    "BestResult",
    "BufferComparison",
    "DeviceInfo",
    "Diagnosis",
    "LaunchComparison",
    "Optimization",
    "PassTimings",
    "RankedKernel",
    "Report",
    "ReusedCounters",
    "Selection",
    "Severity",
    "SourceLine",
    "SourceLocation",
    "Speedup",
    "ValidationResult",
]

REPORT_VERSION = "intelliperf.dev/v1"

Severity = Literal["none", "low", "medium", "high"]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceInfo(_Frozen):
    vendor: str = Field(default="nvidia", pattern=r"^[a-z][a-z0-9_-]{0,31}$")
    name: str
    arch: str = Field(description="e.g. sm_90")
    sm_count: int | None = None
    memory_bytes: int | None = None
    l2_bytes: int | None = None
    warp_size: int = 32
    shared_memory_banks: int = 32
    driver: str | None = None


LAUNCH_DURATIONS_KEPT = 256
"""How many launch durations a kernel's report entry keeps: enough to see the spread of one run, few enough
that a program of 70,000 launches writes a report of kilobytes."""


class RankedKernel(_Frozen):
    rank: int = Field(ge=1)
    name: str = Field(description="Mangled name as launched")
    demangled: str
    launches: int = Field(ge=1)
    total_ns: int = Field(ge=0)
    mean_ns: float = Field(ge=0)
    median_ns: float = Field(ge=0)
    share: float = Field(ge=0, le=1, description="Share of all traced kernel time")
    library: bool = Field(
        default=False,
        description="A library kernel (cuBLAS, cuDNN, CUB, ATen...): no source in the project, not profiled",
    )
    code_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{16}$",
        description="A hash of the kernel's machine code (its own code section in the loaded cubin): the "
        "same in two builds of unchanged code, whatever folder they were built in; None where the tracer saw "
        "no module holding it",
    )
    shape_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{16}$",
        description="A hash of the set of launch configurations (grid, block, shared memory) the kernel ran "
        "with; None where the timing pass does not see them",
    )
    launch_ns: list[NonNegativeInt] = Field(
        default_factory=list,
        max_length=LAUNCH_DURATIONS_KEPT,
        description="Launch durations in ns, in trace order: every launch up to 256, else 256 taken evenly "
        "over the run (first and last included); empty in reports written before they were kept",
    )


class SourceLine(_Frozen):
    line: int
    text: str
    hot: bool = False


class SourceLocation(_Frozen):
    file: str
    line: int = Field(ge=1)
    share: float = Field(ge=0, le=1, description="Share of the formula's excess that this line carries")
    metrics: dict[str, float] = Field(default_factory=dict, description="The numbers that point here")
    code: list[SourceLine] = Field(default_factory=list, description="The line with context around it")


class Diagnosis(_Frozen):
    kernel: str
    formula: str
    present: bool
    decided: bool = Field(
        default=True,
        description="False: a metric the formula needs was n/a or missing, so it made no claim either way",
    )
    severity: Severity
    estimated_saving_ns: float = Field(ge=0, description="Per launch, if the bottleneck were removed")
    estimated_saving_fraction: float = Field(ge=0, le=1, description="Of the kernel's time")
    summary: str
    reasoning: str = Field(description="How the decision was reached, with the threshold used")
    metrics: dict[str, float] = Field(default_factory=dict)
    locations: list[SourceLocation] = Field(default_factory=list)


class Selection(_Frozen):
    kernel: str
    formula: str
    estimated_saving_ns: float
    why: str


class PassTimings(_Frozen):
    setup_s: float | None = None
    """Building a tool's native part on first use (Accordo's CUPTI library), outside every measured pass."""
    build_s: float | None = None
    timing_s: float | None = None
    counters_s: float | None = None
    """The counter pass; None when it did not run (every kernel's counters reused)."""
    counters_saved_s: float | None = None
    """What the reused counters cost when they were measured: the counter pass time this run did not spend."""
    regions_s: float | None = None
    optimize_s: float | None = None


class ReusedCounters(_Frozen):
    """A kernel whose counters (and so its diagnosis) came from an earlier run instead of a counter pass:
    its code hash and launch shapes were those of that run, on a device of the same name and architecture."""

    kernel: str = Field(description="Mangled name")
    code_hash: str = Field(pattern=r"^[0-9a-f]{16}$")
    shape_hash: str = Field(pattern=r"^[0-9a-f]{16}$")
    commit: str | None = Field(description="The commit of the run that measured them, where it was known")
    measured_at: datetime
    saved_s: float = Field(ge=0, description="Its share of the counter pass that measured it")


class KernelRegion(_Frozen):
    """One instrumented region of a Triton kernel: the whole body, a loop, or a statement that loads,
    stores, runs an atomic or a dot."""

    name: str
    kind: Literal["kernel", "loop", "load", "store", "atomic", "dot"]
    line: int = Field(description="Line in the kernel's file where the region starts")
    text: str = Field(default="", description="That line's source")
    cycles_per_warp: float = Field(description="Mean cycles one warp spent in the region, per launch")
    share: float = Field(description="Of the whole kernel's cycles (1.0 for the kernel itself)")


class IntraKernelProfile(_Frozen):
    """Where a Triton kernel's cycles go, from Proton's instrumentation backend: scopes inserted by
    IntelliPerf into an in-memory copy of the kernel's source (the user's files are not edited)."""

    kernel: str
    tool: Literal["proton-instrumentation"] = "proton-instrumentation"
    file: str
    launches: int
    warps_per_program: int
    clock_mhz: float | None = None
    regions: list[KernelRegion]
    note: str = Field(
        default=(
            "cycles are read on each warp when it enters and leaves a region; a load's region ends when "
            "the load is issued, so its latency shows in the region that first uses the value"
        )
    )


class Speedup(_Frozen):
    median: float
    low: float = Field(description="Lower end of the 95% interval")
    high: float = Field(description="Upper end of the 95% interval")
    significant: bool
    verdict: Literal["faster", "slower", "no significant change"]
    reference_ns: float
    candidate_ns: float
    runs: int
    flagged_for_review: bool = Field(default=False, description="Over 10x: a human should look")
    reference_wall_s: float | None = Field(default=None, description="Median application wall time")
    candidate_wall_s: float | None = None
    method: str = Field(
        default="",
        description="How it was measured: timer, run order, statistic and interval",
    )


class BufferComparison(_Frozen):
    param: int
    role: Literal["output", "input", "untouched"]
    dtype: str
    bytes: int
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    first_mismatch: int | None = Field(
        default=None, description="Element index, counted from where the parameter points"
    )
    mismatches: int = 0
    nan_inf_mismatches: int = 0
    atol: float | None = None
    rtol: float | None = None
    noise_max: float | None = Field(
        default=None, description="Largest standard deviation of the reference runs at any element"
    )
    noisy_elements: int = Field(default=0, description="Elements where the reference runs disagree")
    bound_use: float | None = Field(
        default=None,
        description="The worst element's difference from the reference over its allowed difference "
        "(at most 1 passes; 0.2 means the worst element used a fifth of its bound)",
    )
    reason: str | None = None


class LaunchComparison(_Frozen):
    launch: int
    passed: bool
    buffers: list[BufferComparison] = Field(default_factory=list)


class JudgeCheck(_Frozen):
    """One check Accordo ran on a candidate (accordo/validate.py, accordo/probes.py)."""

    name: Literal[
        "isolated",
        "end_to_end",
        "prefilled_nan",
        "fresh_inputs",
        "launch_pattern",
        "replay",
        "timing_agreement",
        "revalidated",
        "timed_launches",
    ] = Field(
        description="isolated: each launch on the reference's own inputs for it; end_to_end: the program "
        "as it runs; prefilled_nan: outputs filled with NaN before every launch; fresh_inputs: inputs "
        "shuffled, outputs filled with random bytes; launch_pattern: the kernel's streams, CUDA-graph use "
        "and persisting-L2 limit as the reference's; replay: the candidate's kernel replayed alone on the "
        "captured inputs; timing_agreement: the in-application speedup within 2x of a replayed one; "
        "revalidated: each launch judged again after timing; timed_launches: the timed launches asked for "
        "the same grids, blocks and argument values as the captured ones"
    )
    outcome: Literal["passed", "failed", "skipped"]
    detail: str | None = Field(default=None, description="Why it failed or was skipped")


class ValidationResult(_Frozen):
    kernel: str
    passed: bool
    reason: str | None = Field(default=None, description="Why it failed, precisely")
    failure: (
        Literal[
            "mismatch",
            "launch_count",
            "input_mismatch",
            "input_modified",
            "untouched_modified",
            "crash",
            "timeout",
            "no_launch",
            "tests_failed",
            "launch_pattern",
            "timing_disagreement",
            "timed_launches",
            "over_budget",
        ]
        | None
    ) = None
    judge: Literal["accordo", "unittest"] = Field(
        default="accordo",
        description="Who ruled: Accordo (the kernel's buffers against the reference's) or the project's own "
        "tests (--unittest_command)",
    )
    launches_compared: int = 0
    launches: list[LaunchComparison] = Field(default_factory=list)
    speedup: Speedup | None = None
    isolated_speedup: Speedup | None = Field(
        default=None,
        description="The kernels alone: one captured launch replayed, L2 flushed before each launch",
    )
    isolated_speedup_warm: Speedup | None = Field(
        default=None, description="As isolated_speedup, L2 not flushed"
    )
    reproducer: str | None = Field(
        default=None,
        description="Folder with the captured launch, both kernels and the command that checks them "
        "(intelliperf replay)",
    )
    atol: float | None = None
    rtol: float | None = None
    calibration_runs: int = Field(default=0, description="Reference runs the bounds were calibrated on")
    noise_max: float | None = Field(
        default=None, description="Largest standard deviation of the reference runs at any element"
    )
    bound_use: float | None = Field(
        default=None, description="The worst output's bound_use (at most 1 passes)"
    )
    alpha: float | None = Field(
        default=None,
        description="Chance per output that another run of the reference itself would fail its bound",
    )
    candidate_stderr_tail: str | None = None
    checks: list[JudgeCheck] = Field(
        default_factory=list, description="The checks run on the candidate, in order, until one failed"
    )


AttemptStatus = Literal[
    "success", "unparseable", "build_failed", "invalid", "not_faster", "no_metric_gain", "error"
]


class Attempt(_Frozen):
    """One reply of the model and what became of it. ``seconds`` splits its wall time: ``llm``,
    ``build``, ``validate`` (buffer capture and comparison), ``measure`` (interleaved timing) and
    ``counters`` (the formula's metric re-measured by the counter pass)."""

    index: int = Field(ge=1)
    round: int = Field(default=1, ge=1, description="Candidates of one round share one prompt")
    status: AttemptStatus
    reason: str | None = Field(default=None, description="Why it failed, as the model is told")
    files: list[str] = Field(default_factory=list, description="Files the edit changed")
    diff: str | None = None
    validation: ValidationResult | None = None
    metric_before: float | None = None
    metric_after: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    seconds: dict[str, float] = Field(default_factory=dict)

    @property
    def speedup(self) -> Speedup | None:
        return self.validation.speedup if self.validation is not None else None


class BestResult(_Frozen):
    attempt: int
    speedup: Speedup
    metric_name: str
    metric_before: float
    metric_after: float
    files: list[str] = Field(default_factory=list)
    written_back: bool = Field(default=False, description="Applied to the project (--in_place)")
    reproducer: str | None = Field(
        default=None,
        description="Folder of the job's outputs holding the timed launch with both kernels "
        "(intelliperf replay)",
    )


class Optimization(_Frozen):
    """How the optimization loop went, in one place the summary and the service read."""

    status: Literal["success", "exhausted", "aborted", "skipped"]
    note: str = Field(description="Why it ended, in words")
    kernel: str | None = None
    formula: str | None = None
    attempts_allowed: int = 0
    candidates_per_round: int = 1
    judge: Literal["accordo", "unittest"] = Field(
        default="accordo", description="Who judged the candidates' correctness (see ValidationResult.judge)"
    )
    exit_code: int | None = Field(
        default=None, description="For 'aborted': the exit code of the error that stopped the loop"
    )


class Report(_Frozen):
    api_version: Literal["intelliperf.dev/v1"] = REPORT_VERSION
    intelliperf_version: str
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    device: DeviceInfo | None = None
    application: list[str]
    project_directory: str
    formula_requested: str
    kernels: list[RankedKernel] = Field(default_factory=list)
    diagnoses: list[Diagnosis] = Field(default_factory=list)
    selected: Selection | None = None
    attempts: list[Attempt] = Field(default_factory=list)
    optimization: Optimization | None = Field(default=None, description="None: the job was diagnosis only")
    best: BestResult | None = None
    diff: str | None = Field(default=None, description="Unified diff of the best attempt")
    passes: PassTimings = Field(default_factory=PassTimings)
    reused_counters: list[ReusedCounters] = Field(
        default_factory=list, description="Kernels diagnosed from an earlier run's counters (code unchanged)"
    )
    intra_kernel: IntraKernelProfile | None = Field(
        default=None, description="Cycles per region of the selected Triton kernel (Proton)"
    )
    warnings: list[str] = Field(default_factory=list)

    @property
    def bottlenecks(self) -> list[Diagnosis]:
        return [d for d in self.diagnoses if d.present]

    def diagnosis_for(self, kernel: str, formula: str) -> Diagnosis | None:
        return next((d for d in self.diagnoses if d.kernel == kernel and d.formula == formula), None)

    @property
    def best_attempt(self) -> Attempt | None:
        """The attempt the best result came from (None without a best result)."""
        if self.best is None:
            return None
        return next((a for a in self.attempts if a.index == self.best.attempt), None)

    @property
    def selected_diagnosis(self) -> Diagnosis | None:
        """The diagnosis the selection is about (None without a selection)."""
        return (
            None if self.selected is None else self.diagnosis_for(self.selected.kernel, self.selected.formula)
        )

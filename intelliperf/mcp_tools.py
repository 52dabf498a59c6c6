"""The MCP server's tools (intelliperf.mcp_server serves them): their models, and what each one does.

    tool           arguments (one pydantic model: its JSON Schema is the input schema)   result
    diagnose       JobSpec, as `intelliperf run` builds it                              Report
    replay         ReplayRequest: a recording folder and a JobSpec (`run --replay DIR`)    Report
    validate       ValidateRequest: kernel, the two commands, Accordo's ValidationOptions  ValidationResult
    list_formulas  none                                                                 FormulaList
    read_job       ServiceJobRequest: a job of an IntelliPerf service                   ServiceJob

The contract's models are the arguments and results wherever the CLI has one (JobSpec, Report,
ValidationResult, accordo.validate.ValidationOptions); the models defined here are for what the CLI takes as
plain options (`--replay DIR`, `validate`'s commands, a service job) or prints as text (`formulas`).
`diagnose` and `replay` go through the engine's one entry point (`run_spec`), diagnosis only: the
optimization loop (an LLM key, minutes to hours of GPU time) stays with `intelliperf run` and `submit`.
Paths in arguments are paths on the machine the server runs on, relative ones starting at its working
directory. Nothing here imports the MCP SDK at import time: the tools' functions do, when they run.
"""

from __future__ import annotations

import inspect
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from accordo.validate import ValidationOptions
from intelliperf.contract import JobSpec, Report, ValidationResult
from intelliperf.errors import IntelliPerfError, SpecError
from intelliperf.spec_checks import check_spec
from intelliperf.tracking.changepoints import ChangePoint

if TYPE_CHECKING:
    from intelliperf.engine.progress import Progress

__all__ = [
    "DESCRIPTIONS",
    "TOOLS",
    "FormulaInfo",
    "FormulaList",
    "KernelHistory",
    "KernelHistoryRequest",
    "ReplayRequest",
    "ServiceJob",
    "ServiceJobRequest",
    "ValidateRequest",
    "formula_list",
    "read_kernel_history",
    "read_service_job",
    "run_diagnose",
    "run_replay",
    "run_validate",
]


# The tools' own models, where the CLI has none: what `--replay DIR`, `validate`'s commands and a service job
# add to the contract's models.


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class ReplayRequest(_Request):
    """What `intelliperf run -f diagnoseOnly --replay DIR` takes: the recording, and the JobSpec the options
    make."""

    recording: str = Field(
        min_length=1,
        description="A folder of a profile recorded on a GPU machine (`benchmarks/diagnose.py --record`), on "
        "the machine the server runs on: absolute, or relative to the server's working directory",
    )
    spec: JobSpec = Field(
        description="The job, as `intelliperf run` builds it from its options (`intelliperf schema job`): "
        "project_directory is the project's folder on this machine (its sources give the hot lines) and "
        "applications[0].command the recorded program's command"
    )

    @model_validator(mode="after")
    def _one_recording(self) -> ReplayRequest:
        if self.spec.replay is not None:
            raise ValueError(
                "give the recording once: `recording` here (any folder), or the spec's `replay` (a folder "
                "inside the project) with the diagnose tool"
            )
        return self


class ValidateRequest(_Request):
    """What `intelliperf validate` takes: the kernel, the two commands and Accordo's ValidationOptions."""

    kernel: str = Field(
        min_length=1, description="Kernel name (any namespace or template), mangled name, or regex"
    )
    reference: list[str] = Field(
        min_length=1,
        description="argv of the reference program (a string is split like a shell would); both programs "
        "must run the same host code",
    )
    candidate: list[str] = Field(min_length=1, description="argv of the candidate program")
    cwd: str | None = Field(
        default=None,
        description="Working directory of both commands (default: the server's working directory)",
    )
    options: ValidationOptions = Field(
        default_factory=ValidationOptions,
        description="accordo.validate.ValidationOptions: atol/rtol (your tolerances, added to the rounding "
        "and noise terms), calibration_runs, noise_runs, alpha, runs (timing runs per side), timeout_s "
        "(per application run), element_type, measure (false: correctness only), timer (events or cupti)",
    )

    @field_validator("reference", "candidate", mode="before")
    @classmethod
    def _split_string_command(cls, value: object) -> object:
        return shlex.split(value) if isinstance(value, str) else value


class _ServiceRequest(_Request):
    """Where the service is and the token to read it with."""

    service_url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="The service (default: the server's $INTELLIPERF_SERVICE_URL, else url in the [service] "
        "table of ~/.config/intelliperf/config.toml, else http://127.0.0.1:8000)",
    )
    token: SecretStr | None = Field(
        default=None,
        description="An API token of the service (default: the server's $INTELLIPERF_TOKEN, else token in "
        "the config file; prefer those: a token given here passes through the conversation)",
    )


class ServiceJobRequest(_ServiceRequest):
    """A job of a running IntelliPerf service: GET /v1/jobs/{id}, and with ``report`` its report."""

    job_id: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="The job's id, as the service gave it")
    report: bool = Field(default=True, description="Also read the job's report (none until it has finished)")


class KernelHistoryRequest(_ServiceRequest):
    """One kernel's time series in a repository: GET /v1/kernels/series."""

    repository: str = Field(pattern=r"^[\w.-]{1,100}/[\w.-]{1,100}$", description="owner/name")
    kernel: str = Field(
        min_length=1, max_length=2000, description="The kernel's mangled name, as reports give it"
    )
    device: str | None = Field(
        default=None, max_length=500, description="One device (a report's device.name)"
    )
    ref: str | None = Field(default=None, max_length=200, description="One branch; change points need one")
    limit: int = Field(default=200, ge=1, le=5000, description="The newest samples, at most")


class KernelHistory(BaseModel):
    repository: str
    kernel: str
    samples: list[dict[str, Any]] = Field(
        description="Oldest first: commit, ref, job_id, created_at, device, launches, median_ns, mean_ns "
        "(each job's launch durations are left out to keep the reply small; GET /v1/kernels/series has them)"
    )
    total: int = Field(description="Samples in the series in all")
    change_points: list[ChangePoint] = Field(description="Where the kernel's time moved to a new level")
    change_points_note: str | None = Field(default=None, description="Why no change point was looked for")


class ServiceJob(BaseModel):
    job: dict[str, Any] = Field(
        description="The job as GET /v1/jobs/{id} shows it: status, queue, worker, outcome, speedup, "
        "pr_url, error, spec"
    )
    report: Report | None = Field(
        default=None, description="Its report; none when not asked for, or while the job has none"
    )


class FormulaInfo(BaseModel):
    name: str = Field(description="What JobSpec.formula takes")
    title: str
    description: str = Field(description="The first paragraph of the formula module's docstring")
    metric_label: str = Field(description="The per-line quantity that localizes the bottleneck")
    metrics: list[str] = Field(
        description="The vendor-neutral quantities it reads (intelliperf.contract.profile)"
    )
    units: list[str] = Field(description="Memory units whose utilization it reads")


class FormulaList(BaseModel):
    formulas: list[FormulaInfo]
    meta_formulas: list[str] = Field(
        description="Also accepted as JobSpec.formula: auto (the largest estimated saving) and diagnoseOnly"
    )


# The operations, free of the SDK: each is what the CLI command does, with a progress callback.


def _local_folder(path: str, what: str) -> Path:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        raise SpecError(
            f"{what} {path!r} is not a folder on the machine the MCP server runs on (relative paths start at "
            f"its working directory, {Path.cwd()})",
            hint="give an absolute path",
        )
    return folder.resolve()


def _diagnose_spec(spec: JobSpec) -> JobSpec:
    check_spec(spec)  # as given: a name the caller got wrong is said, even where diagnosis ignores it
    if spec.repository is not None:
        raise SpecError(
            "repository names the project of a job run by an IntelliPerf service (`intelliperf submit`); "
            "this tool diagnoses project_directory on the machine the server runs on",
            hint="leave repository out and give project_directory",
        )
    return spec.model_copy(update={"formula": "diagnoseOnly"})


def _local_vendor() -> str:
    """As `intelliperf run` without --gpu_vendor: this machine's GPUs' vendor when they are all of one."""
    from intelliperf.gpu.probe import probe_gpus

    found = {gpu.vendor for gpu in probe_gpus()}
    return found.pop() if len(found) == 1 else "nvidia"


def run_diagnose(spec: JobSpec, progress: Progress | None = None) -> Report:
    """`intelliperf run -f diagnoseOnly`, the spec's `replay` folder (inside the project) read as the worker
    reads it: on a machine without a GPU, that is how a project is diagnosed. A spec that names no `gpu` is
    profiled on this machine's GPU, whichever vendor's, as the CLI does."""
    from intelliperf.engine.entry import run_spec

    spec = _diagnose_spec(spec)
    project = _local_folder(spec.project_directory, "project_directory")
    recording = project / spec.replay if spec.replay else None
    if recording is None and "gpu" not in spec.model_fields_set:
        spec = spec.model_copy(update={"gpu": spec.gpu.model_copy(update={"vendor": _local_vendor()})})
    return run_spec(spec, project, progress=progress, replay=recording)


def run_replay(request: ReplayRequest, progress: Progress | None = None) -> Report:
    """`intelliperf run -f diagnoseOnly --replay DIR`: DIR may be any folder, as with the CLI."""
    from intelliperf.engine.entry import run_spec

    spec = _diagnose_spec(request.spec)
    project = _local_folder(spec.project_directory, "spec.project_directory")
    recording = _local_folder(request.recording, "recording")
    return run_spec(spec, project, progress=progress, replay=recording)


def run_validate(request: ValidateRequest, progress: Callable[[str], None] | None = None) -> ValidationResult:
    """`intelliperf validate`: the same checks in the same order, so that without a GPU it stops at the device
    query with the CLI's message, before anything is built."""
    from accordo.signature import kernel_pattern
    from accordo.validate import validate as accordo_validate
    from intelliperf.gpu.device import query_device
    from profiler.build import cached_library, native_library

    try:
        kernel_pattern(request.kernel)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    cwd = _local_folder(request.cwd, "cwd") if request.cwd is not None else None
    query_device(vendor="nvidia")  # validate runs Accordo (CUDA)
    library = cached_library()
    if library is None:
        if progress is not None:
            progress("building Accordo's CUPTI library (once per version and toolchain, about 15 s)")
        library = native_library()
    try:
        return accordo_validate(
            request.kernel,
            request.reference,
            request.candidate,
            cwd=cwd,
            options=request.options,
            progress=progress,
            library=library,
        )
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def formula_list() -> FormulaList:
    """`intelliperf formulas`, with each formula's one-paragraph description."""
    from formulas.registry import META_FORMULAS, all_formulas

    infos = []
    for name, cls in all_formulas().items():
        doc = inspect.getdoc(inspect.getmodule(cls)) or ""
        infos.append(
            FormulaInfo(
                name=name,
                title=cls.title,
                description=" ".join(doc.split("\n\n")[0].split()),
                metric_label=cls.metric_label,
                metrics=[str(metric) for metric in cls.metrics],
                units=list(cls.units),
            )
        )
    return FormulaList(formulas=infos, meta_formulas=list(META_FORMULAS))


def _service_client(request: _ServiceRequest) -> Any:
    """The Action's client for the request's service, found as `intelliperf submit` finds it: the
    arguments, the environment, the config file."""
    from intelliperf.action._client import ServiceClient
    from intelliperf.submit import resolve_service

    url, token = resolve_service(
        request.service_url, request.token.get_secret_value() if request.token else None
    )
    return ServiceClient(url.rstrip("/"), token, timeout_s=30.0)


def read_service_job(request: ServiceJobRequest) -> ServiceJob:
    """The job (and its report) through the Action's client; a refusal is a SubmitError with the service's
    own answer (401, 403, 404, ...)."""
    from intelliperf.action._client import ServiceError
    from intelliperf.errors import SubmitError

    try:
        with _service_client(request) as client:
            job = client.job(request.job_id)
            report = client.report(request.job_id) if request.report else None
    except ServiceError as exc:
        raise SubmitError(str(exc)) from None
    return ServiceJob(job=job, report=Report.model_validate(report) if report is not None else None)


def read_kernel_history(request: KernelHistoryRequest) -> KernelHistory:
    """A kernel's series with its change points; a refusal is a SubmitError with the service's answer."""
    from intelliperf.action._client import ServiceError
    from intelliperf.errors import SubmitError

    query = {"repository": request.repository, "kernel": request.kernel, "limit": request.limit}
    query |= {key: value for key, value in (("device", request.device), ("ref", request.ref)) if value}
    try:
        with _service_client(request) as client:
            series = client.kernel_series(query)
    except ServiceError as exc:
        raise SubmitError(str(exc)) from None
    return KernelHistory(
        repository=request.repository,
        kernel=request.kernel,
        samples=[{k: v for k, v in item.items() if k != "launch_ns"} for item in series["items"]],
        total=series["total"],
        change_points=series["change_points"],
        change_points_note=series.get("change_points_note"),
    )


# The tools: the operations off the event loop, their progress as MCP progress notifications.


class _ToolContext(Protocol):
    """What the tools use of the SDK's Context (so this module's annotations need no SDK)."""

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None: ...


class _Notifier:
    """The engine's Progress (and Accordo's progress callback) as progress notifications: a client that sent
    a progress token sees each stage as it starts and ends, which also keeps a long GPU run from looking
    stalled. Called from the worker thread the operation runs in."""

    def __init__(self, ctx: _ToolContext) -> None:
        self._ctx = ctx
        self._count = 0

    def __call__(self, message: str) -> None:
        import anyio.from_thread

        self._count += 1
        try:
            anyio.from_thread.run(self._ctx.report_progress, self._count, None, message)
        except Exception:  # a client gone or slow must not fail the run it asked for
            return

    def start(self, stage: str, detail: str = "") -> None:
        self(f"{stage}: {detail}" if detail else f"{stage} …")

    def done(self, stage: str, detail: str = "") -> None:
        self(f"{stage} done" + (f": {detail}" if detail else ""))

    def note(self, message: str) -> None:
        self(message)


_T = TypeVar("_T")


async def _off_loop(ctx: _ToolContext, work: Callable[[_Notifier], _T]) -> _T:
    """Run ``work`` in a worker thread; an IntelliPerfError becomes the tool's error result (ToolError: its
    text reaches the agent, where any other exception's would be withheld by the SDK)."""
    import anyio.to_thread
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        return await anyio.to_thread.run_sync(work, _Notifier(ctx))
    except IntelliPerfError as error:
        why = f"{error}\n({type(error).__name__}: `intelliperf` would exit {error.exit_code})"
        raise ToolError(why) from None


async def diagnose(request: JobSpec, ctx: _ToolContext) -> Report:
    return await _off_loop(ctx, lambda notify: run_diagnose(request, notify))


async def replay(request: ReplayRequest, ctx: _ToolContext) -> Report:
    return await _off_loop(ctx, lambda notify: run_replay(request, notify))


async def validate(request: ValidateRequest, ctx: _ToolContext) -> ValidationResult:
    return await _off_loop(ctx, lambda notify: run_validate(request, notify))


async def read_job(request: ServiceJobRequest, ctx: _ToolContext) -> ServiceJob:
    return await _off_loop(ctx, lambda _notify: read_service_job(request))


async def kernel_history(request: KernelHistoryRequest, ctx: _ToolContext) -> KernelHistory:
    return await _off_loop(ctx, lambda _notify: read_kernel_history(request))


def list_formulas() -> FormulaList:
    return formula_list()


DESCRIPTIONS = {
    "diagnose": (
        "Profile the application of a JobSpec on this machine's GPU and diagnose its hottest kernels, as "
        "`intelliperf run -f diagnoseOnly` does: the kernels ranked by GPU time, each formula's verdict per "
        "kernel (diagnoses[]: present, severity, estimated saving, summary, reasoning) and the hot source "
        "lines (diagnoses[].locations[]: file, line, code). Diagnosis only, whatever the spec's formula "
        "says. Without a GPU, give `replay`: a folder inside project_directory holding a profile recorded on "
        "a GPU machine."
    ),
    "replay": (
        "Diagnose from a profile recorded on a GPU machine (`intelliperf run --replay DIR`): no GPU needed. "
        "`recording` is the recorded folder (anywhere on this machine), `spec` the JobSpec of the recorded "
        "program (its project_directory gives the source lines). Returns the same Report as diagnose."
    ),
    "validate": (
        "Judge a candidate build of a kernel against the reference build, as `intelliperf validate` does: "
        "every launch of the kernel captured and compared within Accordo's bounds (rounding and the "
        "reference's own run-to-run noise added to atol/rtol), then both timed (median speedup, 95% "
        "interval). passed=false with failure and reason is a verdict, not an error. Needs an NVIDIA GPU on "
        "this machine: without one the result is an error saying so."
    ),
    "list_formulas": (
        "The bottlenecks IntelliPerf can diagnose (`intelliperf formulas`): each formula's name (what "
        "JobSpec.formula takes), what it decides on, and the quantities it reads."
    ),
    "read_job": (
        "Read a job of a running IntelliPerf service (GET /v1/jobs/{id}) and, with report=true, its report "
        "(GET /v1/jobs/{id}/report: the same Report as diagnose), with a bearer token."
    ),
    "kernel_history": (
        "A kernel's time per commit in a repository, as the service recorded it from every finished job "
        "(GET /v1/kernels/series), with the change points: the commits where its time moved to a new level, "
        "by how much (a 95% interval) and how sure. Give device and ref (a branch) to get change points."
    ),
}


ToolHints = dict[str, bool]
RUNS: ToolHints = {"read_only_hint": False, "destructive_hint": False, "open_world_hint": False}
READS: ToolHints = {"read_only_hint": True, "idempotent_hint": True, "open_world_hint": False}

TOOLS: list[tuple[Callable[..., Any], type[BaseModel] | None, ToolHints]] = [
    (diagnose, JobSpec, RUNS),
    (replay, ReplayRequest, READS),
    (validate, ValidateRequest, RUNS),
    (list_formulas, None, READS),
    (read_job, ServiceJobRequest, READS | {"open_world_hint": True}),
    (kernel_history, KernelHistoryRequest, READS | {"open_world_hint": True}),
]
"""Each tool: its function (its name is the tool's), the model its arguments are (None: it takes none) and
its annotations (MCP's ToolAnnotations: does it only read, does it reach beyond this machine)."""

"""The job spec: what to build, run, diagnose and optimize. Posted by the Action, read by the engine."""

from __future__ import annotations

import re
import shlex
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "JOB_SPEC_VERSION",
    "Application",
    "ContainerSettings",
    "GpuRequirements",
    "JobSpec",
    "LlmSettings",
    "PullRequestSettings",
    "RepositoryRef",
    "Timeouts",
    "Tolerances",
]

JOB_SPEC_VERSION = "intelliperf.dev/v1"


FormulaName = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z][A-Za-z0-9_]*$",
        description="A registered formula (bankConflict, atomicContention, memoryAccess, registerPressure, "
        "branchDivergence, memoryLocality, occupancy, or one from a plugin), 'auto' (pick the largest "
        "estimated saving) or 'diagnoseOnly' (report all, optimize nothing). The contract checks the "
        "name's form; whether a formula of that name is installed is checked where a spec is made (the "
        "CLI, the Action, the API, the engine: formulas.registry.formula_problems).",
    ),
]


def _check_regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from exc
    return pattern


KernelRegex = Annotated[
    str,
    AfterValidator(_check_regex),
    Field(description="Regex searched in kernel names, mangled and demangled"),
]


class _Strict(BaseModel):
    # allow_inf_nan=False: a job spec is stored and sent as JSON, which has no Infinity or NaN
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True, allow_inf_nan=False)


class RepositoryRef(_Strict):
    url: str = Field(description="Clone URL, e.g. https://github.com/owner/repo.git")
    ref: str = Field(default="main", description="Branch, tag or commit to check out")
    commit: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{7,40}$", description="Exact commit, if known"
    )

    @field_validator("url")
    @classmethod
    def _no_credentials_in_url(cls, url: str) -> str:
        if re.match(r"^[a-z+]+://[^/@]+@", url):
            raise ValueError("the repository URL must not embed credentials; pass a token separately")
        return url


APPLICATION_OVERRIDES = ("build_command", "instrument_command", "formula", "kernel", "top_n")
"""The job-level fields an application may set for itself."""


class Application(_Strict):
    """One program to run; its fields override the job-level ones for this application."""

    command: list[str] = Field(min_length=1, description="argv of the program, relative to the project")
    name: str | None = None
    build_command: str | None = None
    instrument_command: str | None = None
    formula: FormulaName | None = None
    kernel: KernelRegex | None = None
    top_n: int | None = Field(default=None, ge=1, le=100)
    output_files: list[str] = Field(
        default_factory=list,
        description="Files the application writes (relative to the project), compared between the original "
        "and a rewrite with Accordo's numeric tolerance model, beside the unittest command's verdict",
    )

    @field_validator("output_files")
    @classmethod
    def _outputs_inside_the_project(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path or path.startswith("/") or ".." in path.split("/"):
                raise ValueError(f"output file {path!r} must be a path inside the project, without '..'")
        return paths

    @field_validator("command", mode="before")
    @classmethod
    def _split_string_command(cls, value: object) -> object:
        if isinstance(value, str):
            return shlex.split(value)
        return value

    @property
    def display_name(self) -> str:
        return self.name or shlex.join(self.command)

    def overrides(self) -> dict[str, object]:
        """The job-level fields this application sets for itself (APPLICATION_OVERRIDES that it gives)."""
        return {key: value for key in APPLICATION_OVERRIDES if (value := getattr(self, key)) is not None}


class Tolerances(_Strict):
    atol: float = Field(default=1e-6, ge=0, description="Absolute tolerance before noise calibration")
    rtol: float = Field(default=1e-5, ge=0, description="Relative tolerance before noise calibration")
    calibration_runs: int = Field(default=3, ge=1, le=20, description="Reference runs to measure its noise")
    noise_runs: int = Field(
        default=24,
        ge=2,
        le=100,
        description="Reference runs in all when the first calibration runs disagree (noise to measure)",
    )
    alpha: float = Field(
        default=0.01,
        gt=0,
        lt=0.5,
        description="Chance per output that another run of the reference itself would fail its bound",
    )
    timing_runs: int = Field(
        default=10, ge=2, le=50, description="Most timed runs per side (reference and candidate interleaved)"
    )
    min_timing_runs: int = Field(
        default=3, ge=2, le=50, description="Timing stops here once the speedup's interval excludes 1"
    )
    dtype: Literal[
        "auto", "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint8"
    ] = "auto"


PROVIDER_KEYS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "azure": "AZURE_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
}
"""The variable LiteLLM reads a provider's key from when it is given none."""


class LlmSettings(_Strict):
    model: str = Field(default="gpt-4o", description="Model name; with provider gives 'provider/model'")
    provider: str = Field(default="openai", description="LiteLLM provider prefix")
    api_base: str | None = Field(default=None, description="OpenAI-compatible endpoint (vLLM, a gateway)")
    key_env: str = Field(default="LLM_GATEWAY_KEY", pattern=r"^[A-Z_][A-Z0-9_]*$")
    timeout_s: float = Field(default=300, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    temperature: float = Field(default=0.2, ge=0, le=2)

    @property
    def litellm_model(self) -> str:
        return self.model if "/" in self.model else f"{self.provider}/{self.model}"

    @property
    def key_variables(self) -> list[str]:
        """Where the key may be, in order: ``key_env``, then the provider's own variable."""
        fallback = PROVIDER_KEYS.get(self.litellm_model.split("/", 1)[0])
        return [self.key_env] + ([fallback] if fallback else [])


class PullRequestSettings(_Strict):
    create_pr: bool = False
    base_branch: str | None = None
    labels: list[str] = Field(default_factory=lambda: ["intelliperf", "performance"])
    draft: bool = False
    note: str | None = Field(
        default=None,
        max_length=2000,
        description="A paragraph opening the pull request body (e.g. the commit that made the kernel slower)",
    )


class TrackSettings(_Strict):
    """Continuous mode: the job's kernel times are compared with the base branch's series
    (``GET /v1/jobs/{id}/tracking``); the Action's ``mode: track`` comments the kernels that moved."""

    base_branch: str = Field(default="main", min_length=1, max_length=200, pattern=r"^[^\x00\s]+$")
    min_effect: float = Field(
        default=0.03, ge=0, le=1, description="Smallest relative change reported, beyond the noise (0.03: 3%)"
    )


class ContainerSettings(_Strict):
    image: str | None = Field(default=None, description="Image to run the job in; default: the worker image")
    memory_limit: str = Field(default="16g", pattern=r"^[0-9]+[kmg]?$")
    cpus: float = Field(default=4.0, gt=0)


class GpuRequirements(_Strict):
    vendor: str = Field(
        default="nvidia",
        pattern=r"^[a-z][a-z0-9_-]{0,31}$",
        description="A GPU vendor with an installed backend (nvidia, amd, or a plugin's): checked where a "
        "spec is made (intelliperf.spec_checks)",
    )
    arch: str | None = Field(default=None, pattern=r"^(sm_?[0-9]+a?|gfx[0-9a-f]+)$", description="e.g. sm_90")
    min_memory_gib: float | None = Field(default=None, gt=0)

    @property
    def queue(self) -> str:
        arch = (self.arch or "any").replace("_", "")
        return f"gpu.{self.vendor}.{arch}"


class Timeouts(_Strict):
    build_s: float = Field(default=900, gt=0)
    run_s: float = Field(default=600, gt=0)
    job_s: float = Field(default=4 * 3600, gt=0)


class JobSpec(_Strict):
    api_version: Literal["intelliperf.dev/v1"] = JOB_SPEC_VERSION
    repository: RepositoryRef | None = None
    project_directory: str = Field(default=".", description="Project root, relative to the repository")
    build_command: str | None = None
    instrument_command: str | None = Field(
        default=None, description="Build command that adds line info; defaults to build_command"
    )
    applications: list[Application] = Field(min_length=1)
    formula: FormulaName = "auto"
    kernel: KernelRegex | None = None
    top_n: int = Field(default=10, ge=1, le=100)
    num_attempts: int = Field(default=10, ge=1, le=50, description="Replies of the model to try, at most")
    candidates_per_round: int = Field(
        default=1, ge=1, le=8, description="Best-of-N: replies asked for with the same prompt each round"
    )
    tolerances: Tolerances = Field(default_factory=Tolerances)
    unittest_command: str | None = Field(
        default=None,
        min_length=1,
        description="The project's own tests, a shell command run in the project folder of each candidate: "
        "exit 0 means correct. Replaces Accordo's buffer comparison, so a rewrite may change more than the "
        "kernel (data layouts, host code, several files); the speedup is then the application's kernel time "
        "for the same kernel function",
    )
    llm: LlmSettings = Field(default_factory=LlmSettings)
    pull_request: PullRequestSettings = Field(default_factory=PullRequestSettings)
    track: TrackSettings | None = Field(
        default=None, description="Compare the kernels' times with the base branch's (continuous mode)"
    )
    container: ContainerSettings = Field(default_factory=ContainerSettings)
    gpu: GpuRequirements = Field(default_factory=GpuRequirements)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    in_place: bool = Field(
        default=False,
        description="Write the best validated rewrite back into the project (work is always done in a copy)",
    )
    replay: str | None = Field(
        default=None,
        description="A folder of the project holding a profile recorded on a GPU machine: diagnose from it "
        "without a GPU (demos, tests). The loop needs the GPU's verdicts: it runs only when the folder is a "
        "recording of it (original/, fixed/, loop-report.json: intelliperf.engine.recorded_loop)",
    )

    @model_validator(mode="before")
    @classmethod
    def _sole_application_overrides(cls, data: object) -> object:
        """A spec of one application runs with that application's overrides (formula, top_n, kernel, build
        and instrument commands), so every reader of the job-level fields (the engine, the worker's
        decision to pass LLM keys, the dashboard) sees what will run. Specs of several applications are
        fanned out by the client (``for_application``)."""
        if not isinstance(data, dict):
            return data
        apps = data.get("applications")
        if not isinstance(apps, list) or len(apps) != 1:
            return data
        app = apps[0]
        if isinstance(app, dict):
            try:
                app = Application.model_validate(app)
            except ValueError:
                return data  # reported where it is wrong: applications[0]
        if not isinstance(app, Application):
            return data
        lifted = app.overrides()
        if not lifted:
            return data
        return {**data, **lifted, "applications": [app.model_copy(update=dict.fromkeys(lifted))]}

    @model_validator(mode="after")
    def _outputs_need_the_unittest_judge(self) -> JobSpec:
        if not self.unittest_command and any(app.output_files for app in self.applications):
            raise ValueError(
                "output_files are compared by the project-tests judge: give unittest_command as well "
                "(Accordo already compares every buffer the kernel writes)"
            )
        return self

    @field_validator("project_directory")
    @classmethod
    def _stays_inside(cls, path: str) -> str:
        if ".." in path.split("/"):
            raise ValueError("project_directory must not leave the project ('..')")
        return path

    @field_validator("replay")
    @classmethod
    def _replay_inside(cls, path: str | None) -> str | None:
        if path is not None and (".." in path.split("/") or path.startswith("/")):
            raise ValueError("replay must be a folder inside the project (no '..', not absolute)")
        return path

    @property
    def optimizes(self) -> bool:
        """Whether the job goes on from diagnosis to the optimization loop: the one place that decides it."""
        return self.formula != "diagnoseOnly"

    def publishes_counters(self, source: Literal["archive", "git"]) -> bool:
        """Whether the counters this job measures are kept for later jobs of its repository: only a job whose
        code the worker cloned (``source`` "git") at the base branch its spec tracks, so code that reached the
        branch, not a pull request's, decides what later pushes reuse (the worker uploads them, the service
        refuses them from any other job). An uploaded archive never publishes, whatever its spec's ref says:
        the ref is only what the submitter wrote, and any token scoped to the repository (a pull request's CI
        uploading its working tree) could otherwise plant counters that the branch's later diagnoses read.
        An archive job still reads its repository's entries."""
        if source != "git" or self.track is None or self.repository is None:
            return False
        return self.repository.ref.removeprefix("refs/heads/") == self.track.base_branch

    def for_application(self, app: Application) -> JobSpec:
        """This spec with the application's overrides applied, as the engine runs it."""
        return self.model_copy(update={**app.overrides(), "applications": [app]})

"""What the API returns. Requests are the contract's JobSpec; these are the service's own views."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from intelliperf.contract import JobSpec
from intelliperf.tracking.against_base import KernelMove
from intelliperf.tracking.changepoints import ChangePoint
from service.db.models import Job

__all__ = [
    "JobDetail",
    "JobLinks",
    "JobList",
    "JobSummary",
    "KernelList",
    "KernelOut",
    "KernelSampleOut",
    "KernelSeries",
    "WorkerOut",
]


class JobLinks(BaseModel):
    self: str
    events: str
    report: str
    diff: str
    cancel: str


class JobSummary(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    status: str = Field(description="queued, running, succeeded, failed or cancelled")
    queue: str = Field(description="The GPU queue, e.g. gpu.nvidia.sm90")
    priority: int = Field(description="0 (lowest) to 9 (highest)")
    repository: str | None
    source: str = Field(description="'git' (cloned by the worker) or 'archive' (uploaded)")
    created_at: datetime
    dispatched_at: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    worker: str | None
    runs: int = Field(description="How often a worker started this job")
    cancel_requested: bool
    outcome: str | None
    error: str | None
    speedup: float | None
    pr_url: str | None
    links: JobLinks

    @classmethod
    def of(cls, job: Job) -> JobSummary:
        return cls.model_validate(_summary_fields(job))


def _summary_fields(job: Job) -> dict[str, object]:
    base = f"/v1/jobs/{job.id}"
    links = {
        "self": base,
        "events": f"{base}/events",
        "report": f"{base}/report",
        "diff": f"{base}/diff",
        "cancel": f"{base}/cancel",
    }
    return {**{k: getattr(job, k) for k in _SUMMARY_FIELDS}, "links": links}


_SUMMARY_FIELDS = [name for name in JobSummary.model_fields if name != "links"]


class JobDetail(JobSummary):
    spec: JobSpec
    summary: str | None = Field(description="The Markdown summary (the pull request's body), once finished")

    @classmethod
    def of(cls, job: Job, spec: JobSpec | None = None) -> JobDetail:
        """One validation; ``spec``: the job's spec already validated (it is what ``job.spec`` holds)."""
        fields = _summary_fields(job)
        given = job.spec if spec is None else spec
        return cls.model_validate({**fields, "spec": given, "summary": job.summary})


class JobList(BaseModel):
    items: list[JobSummary]
    total: int
    limit: int
    offset: int


class WorkerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str
    hostname: str
    queues: list[str]
    gpu_vendor: str | None
    gpu_name: str | None
    gpu_arch: str | None
    gpu_memory_bytes: int | None
    current_job: str | None = Field(description="Its job, to a token that may see that job's repository")
    busy: bool = Field(description="Running a job (whether or not this token may see which)")
    started_at: datetime
    last_heartbeat: datetime
    alive: bool = Field(description="Heard from within the service's worker_stale_s")


class KernelOut(BaseModel):
    """A kernel sampled in a repository, on one device: its series in brief."""

    model_config = ConfigDict(from_attributes=True)

    kernel: str = Field(description="Mangled name as launched (the series' key)")
    demangled: str = Field(description="As the newest sample has it")
    location: str | None = Field(
        description="file:line of the first source location a diagnosis gave in the newest sample's job"
    )
    device: str | None = Field(description="The GPU the samples were measured on (the report's device)")
    samples: int
    first_commit: str | None = Field(description="The oldest sample's commit (else its ref)")
    first_at: datetime
    last_commit: str | None = Field(description="The newest sample's commit (else its ref)")
    last_at: datetime
    latest_median_ns: float = Field(description="The newest sample's median time per launch")


class KernelList(BaseModel):
    repository: str
    items: list[KernelOut] = Field(description="One per kernel and device, by kernel then device")
    total: int
    limit: int
    offset: int


class KernelSampleOut(BaseModel):
    """One finished job's measurement of the kernel."""

    model_config = ConfigDict(from_attributes=True)

    commit: str | None = Field(description="The job's commit, else its ref")
    ref: str | None
    job_id: str
    created_at: datetime = Field(description="When the job's end was recorded")
    device: str | None
    launches: int
    median_ns: float
    mean_ns: float
    code_hash: str | None = Field(description="Its machine code's hash; null where the tracer saw none")
    shape_hash: str | None = Field(description="A hash of its launch configurations (grid, block, smem)")
    counters_reused: bool | None = Field(
        description="Its counters came from an earlier job with the same code and shapes; null: not profiled"
    )
    launch_ns: list[int] | None = Field(
        description="The timing pass's launch durations in ns (every launch up to 256, else 256 evenly over "
        "the run): the spread within the job; null unless asked for (`launches=true`) and for a job whose "
        "report kept none"
    )


class KernelSeries(BaseModel):
    repository: str
    kernel: str
    device: str | None = Field(description="The device asked for; null: every device")
    items: list[KernelSampleOut] = Field(description="The newest `limit` samples, oldest first")
    total: int = Field(description="Samples in the series in all")
    limit: int
    change_points: list[ChangePoint] = Field(
        default_factory=list,
        description="Where the kernel's time moved to a new level (intelliperf.tracking.changepoints), in "
        "the samples returned; repeated jobs of one commit count as its runs",
    )
    change_points_note: str | None = Field(default=None, description="Why no change point was looked for")


class JobTracking(BaseModel):
    """A finished job's kernels against the base branch (continuous mode)."""

    job_id: str
    base_branch: str
    min_effect: float
    moves: list[KernelMove] = Field(description="Every compared kernel; `moved` marks those beyond the noise")
    not_compared: dict[str, str] = Field(description="Kernels with no base-branch samples, and why")
    comment: str = Field(description="The pull request comment: a Markdown table of the kernels that moved")

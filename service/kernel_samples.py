"""Kernel samples: every finished job's time per kernel, kept as each kernel's time series per repository.

A job's end (service.job_end.finish) records one sample per kernel of its report that is not a library
kernel, in the same transaction; ``(job_id, kernel)`` is unique and the insert skips what is there, so a
result sent again doubles nothing. A report that does not parse (another engine version, a broken
worker) costs the job its samples, never its end. The dispatcher's sweep deletes samples older than
``kernel_sample_retention_days`` (``prune_samples``), a bounded number of batches at a time.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import and_, delete, func, or_, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, defer

from intelliperf.contract import RankedKernel, Report
from intelliperf.tracking.against_base import KernelMove, compare_to_base
from intelliperf.tracking.changepoints import ChangePoint, CommitTimes, find_change_points
from service.db.models import DEVICE_NAME_LENGTH, KERNEL_NAME_LENGTH, KernelSample
from service.db.session import Database, upsert_insert

__all__ = [
    "PRUNE_BATCH",
    "PRUNE_MAX_BATCHES",
    "KernelPage",
    "KernelSummary",
    "SeriesPage",
    "kernel_series",
    "list_kernels",
    "prune_samples",
    "record_samples",
]

log = logging.getLogger(__name__)

PRUNE_BATCH = 5000
"""Samples one DELETE removes: each batch is its own short transaction."""
PRUNE_MAX_BATCHES = 20
"""Batches one pruning pass deletes at most; what is left waits for the next pass."""
_MAX_BIGINT = 2**63 - 1


def record_samples(
    session: Session,
    job_id: str,
    *,
    repository: str | None,
    spec: dict[str, Any],
    report: dict[str, Any],
    now: datetime,
) -> int:
    """Write the samples of a finished job's ``report`` in the caller's transaction; returns how many
    rows the report gave (0 when it does not parse). A kernel already sampled for this job is skipped."""
    try:
        parsed = Report.model_validate(report)
    except ValidationError as exc:
        log.warning(
            "job %s: its report does not parse (%d errors); no kernel samples recorded",
            job_id,
            exc.error_count(),
        )
        return 0
    commit, ref = _commit_and_ref(spec)
    device = _text(parsed.device.name)[:DEVICE_NAME_LENGTH] if parsed.device is not None else None
    locations = _first_locations(parsed)
    reused = {r.kernel for r in parsed.reused_counters}
    profiled = reused | {d.kernel for d in parsed.diagnoses}
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for kernel in parsed.kernels:
        if kernel.library or kernel.name in seen:
            continue
        refusal = _unstorable(kernel)
        if refusal is not None:
            log.warning("job %s: kernel sample of %.80r not recorded: %s", job_id, kernel.name, refusal)
            continue
        seen.add(kernel.name)
        rows.append(
            {
                "job_id": job_id,
                "repository": repository,
                "commit": commit,
                "ref": ref,
                "device": device,
                "kernel": kernel.name,
                "demangled": _text(kernel.demangled),
                "location": locations.get(kernel.name),
                "code_hash": kernel.code_hash,
                "shape_hash": kernel.shape_hash,
                "counters_reused": (kernel.name in reused) if kernel.name in profiled else None,
                "launches": kernel.launches,
                "median_ns": kernel.median_ns,
                "mean_ns": kernel.mean_ns,
                "total_ns": kernel.total_ns,
                "launch_ns": kernel.launch_ns or None,
                "created_at": now,
            }
        )
    if not rows:
        return 0
    new = upsert_insert(session, KernelSample.__table__).on_conflict_do_nothing(
        index_elements=["job_id", "kernel"]
    )
    try:
        # a savepoint: whatever the database refuses in a report (the checks above cover what is known)
        # costs the samples, not the job's end
        with session.begin_nested():
            session.execute(new, rows)
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise
        log.warning("job %s: kernel samples not recorded, refused by the database: %s", job_id, exc.orig)
        return 0
    return len(rows)


def _commit_and_ref(spec: dict[str, Any]) -> tuple[str | None, str | None]:
    """The spec's repository commit (else its ref) and ref; None for a job without a repository."""
    source = spec.get("repository")
    if not isinstance(source, dict):
        return None, None
    ref = source.get("ref") if isinstance(source.get("ref"), str) else None
    commit = source.get("commit") if isinstance(source.get("commit"), str) else None
    ref = _text(ref) if ref is not None else None
    return (_text(commit) if commit else ref), ref


def _first_locations(report: Report) -> dict[str, str]:
    """Each kernel's first source location (``file:line``) in the order of the report's diagnoses."""
    found: dict[str, str] = {}
    for diagnosis in report.diagnoses:
        if diagnosis.locations and diagnosis.kernel not in found:
            first = diagnosis.locations[0]
            found[diagnosis.kernel] = _text(f"{first.file}:{first.line}")
    return found


def _unstorable(kernel: RankedKernel) -> str | None:
    """Why this kernel's sample would make the database refuse the whole job's end, if it would."""
    if len(kernel.name.encode()) > KERNEL_NAME_LENGTH:
        return f"its name has {len(kernel.name.encode())} bytes, more than {KERNEL_NAME_LENGTH}"
    if "\x00" in kernel.name:
        return "its name holds a NUL character"
    if kernel.launches > _MAX_BIGINT or kernel.total_ns > _MAX_BIGINT:
        return "its launch count or total time is out of range"
    if not (math.isfinite(kernel.median_ns) and math.isfinite(kernel.mean_ns)):
        return "its median or mean time is not finite"
    return None


def _text(value: str) -> str:
    """PostgreSQL's text holds no NUL character."""
    return value.replace("\x00", "")


def _time_order() -> tuple[Any, Any]:
    return KernelSample.created_at, KernelSample.id


@dataclass(frozen=True)
class KernelSummary:
    """A kernel's series on one device, in brief (the newest sample gives demangled and location)."""

    kernel: str
    device: str | None
    demangled: str
    location: str | None
    samples: int
    first_commit: str | None
    first_at: datetime
    last_commit: str | None
    last_at: datetime
    latest_median_ns: float


@dataclass(frozen=True)
class KernelPage:
    items: list[KernelSummary]
    total: int


def list_kernels(session: Session, repository: str, *, limit: int, offset: int) -> KernelPage:
    """The (kernel, device) pairs sampled in ``repository``, by kernel then device, in brief.

    Two queries: the page's pairs with their count and first and last times (a GROUP BY over the
    repository's index), then the samples at those times. Window functions over the repository's samples
    answer in one query, but sorted every sample twice: ~0.8 s for 80,000 samples on PostgreSQL."""
    pair = (KernelSample.kernel, KernelSample.device)
    in_repository = KernelSample.repository == repository
    total = session.scalar(
        select(func.count()).select_from(select(*pair).where(in_repository).group_by(*pair).subquery())
    )
    groups = session.execute(
        select(
            *pair,
            func.count().label("samples"),
            func.min(KernelSample.created_at).label("first_at"),
            func.max(KernelSample.created_at).label("last_at"),
        )
        .where(in_repository)
        .group_by(*pair)
        .order_by(KernelSample.kernel, KernelSample.device.nulls_first())
        .limit(limit)
        .offset(offset)
    ).all()
    if not groups:
        return KernelPage(items=[], total=total or 0)
    at_either_end = or_(
        *(
            and_(
                KernelSample.kernel == group.kernel,
                KernelSample.device.is_not_distinct_from(group.device),
                KernelSample.created_at.in_({group.first_at, group.last_at}),
            )
            for group in groups
        )
    )
    first: dict[tuple[str, str | None], KernelSample] = {}
    last: dict[tuple[str, str | None], KernelSample] = {}
    bounds = {(group.kernel, group.device): group for group in groups}
    # in time order (created_at, then id): of samples with equal times the first is the oldest, the last
    # the newest
    for sample in session.scalars(
        select(KernelSample).where(in_repository, at_either_end).order_by(*_time_order())
    ):
        key, group = (sample.kernel, sample.device), bounds[sample.kernel, sample.device]
        if sample.created_at == group.first_at:
            first.setdefault(key, sample)
        if sample.created_at == group.last_at:
            last[key] = sample
    items = [
        KernelSummary(
            kernel=group.kernel,
            device=group.device,
            demangled=last[key].demangled,
            location=last[key].location,
            samples=group.samples,
            first_commit=first[key].commit,
            first_at=group.first_at,
            last_commit=last[key].commit,
            last_at=group.last_at,
            latest_median_ns=last[key].median_ns,
        )
        for key, group in bounds.items()
    ]
    return KernelPage(items=items, total=total or 0)


@dataclass(frozen=True)
class SeriesPage:
    samples: list[KernelSample]
    """Oldest first."""
    total: int


def kernel_series(
    session: Session,
    repository: str,
    kernel: str,
    device: str | None,
    *,
    limit: int,
    ref: str | None = None,
    with_launches: bool = False,
) -> SeriesPage:
    """The newest ``limit`` samples of ``kernel`` in ``repository`` (on ``device`` and ``ref``, if given),
    oldest first, and how many there are in all. ``launch_ns`` (up to 256 numbers a sample) is read only
    ``with_launches``; otherwise reading it raises rather than loading it sample by sample."""
    condition = (KernelSample.repository == repository) & (KernelSample.kernel == kernel)
    if device is not None:
        condition &= KernelSample.device == device
    if ref is not None:
        condition &= KernelSample.ref == ref
    total = session.scalar(select(func.count()).select_from(KernelSample).where(condition)) or 0
    created_at, sample_id = _time_order()
    query = select(KernelSample).where(condition).order_by(created_at.desc(), sample_id.desc()).limit(limit)
    if not with_launches:
        query = query.options(defer(KernelSample.launch_ns, raiseload=True))
    newest = session.scalars(query)
    return SeriesPage(samples=list(newest)[::-1], total=total)


def prune_samples(
    db: Database,
    older_than: datetime,
    *,
    batch: int = PRUNE_BATCH,
    max_batches: int = PRUNE_MAX_BATCHES,
) -> tuple[int, bool]:
    """Delete samples created before ``older_than``, ``batch`` at a time, each batch in a transaction of
    its own (no long lock, no huge transaction), at most ``max_batches``. Returns how many were deleted
    and whether none is left."""
    deleted = 0
    for _ in range(max_batches):
        due = select(KernelSample.id).where(KernelSample.created_at < older_than).limit(batch)
        with db.session() as session:
            table = KernelSample.__table__  # Core: no ORM session to keep in step with the deleted rows
            result = session.execute(delete(table).where(table.c.id.in_(due.scalar_subquery())))
            count: int = result.rowcount  # type: ignore[attr-defined]
        deleted += count
        if count < batch:
            return deleted, True
    return deleted, False


# The detector's permutation test cannot reach its alpha (0.01) with fewer commits: 8 commits split 4 and 4
# have 70 orderings, so even a step of 70% (measured on an H100) scores p = 1/70.
MIN_COMMITS = 10


def commit_times(samples: Sequence[KernelSample]) -> list[CommitTimes]:
    """The series as the change-point detector takes it: consecutive samples of one commit (jobs run again
    on the same commit) are that commit's repeated runs; a sample without a commit is its own point."""
    grouped: list[CommitTimes] = []
    for sample in samples:
        commit = sample.commit or f"job {sample.job_id}"
        if grouped and grouped[-1].commit == commit and sample.commit is not None:
            last = grouped[-1]
            grouped[-1] = last.model_copy(update={"samples": [*last.samples, sample.median_ns]})
        else:
            grouped.append(CommitTimes(commit=commit, samples=[sample.median_ns], code_hash=sample.code_hash))
    return grouped


def series_change_points(samples: Sequence[KernelSample]) -> tuple[list[ChangePoint], str | None]:
    """The change points of one device's series on one branch, or none and why: samples from several
    devices or branches are not one history (a change of machine is not a change of code; a pull request's
    commits are not the base branch's), and too few commits cannot show a change."""
    devices = {sample.device for sample in samples}
    if len(devices) > 1:
        return [], "samples from several devices: ask for one device to see its change points"
    if len({sample.ref for sample in samples}) > 1:
        return [], "samples from several branches: ask for one ref to see its change points"
    points = commit_times(samples)
    if len(points) < MIN_COMMITS:
        return [], f"{len(points)} commit(s): change points need at least {MIN_COMMITS}"
    return find_change_points(points, min_effect=0.03), None


BASE_SAMPLES = 200  # the newest samples a comparison or a regression check rests on (500 cost 0.9 s a kernel)


def branch_series(session: Session, sample: KernelSample, ref: str) -> list[KernelSample]:
    """The newest ``BASE_SAMPLES`` samples of ``sample``'s kernel on ``ref`` (same repository, same
    device), oldest first: the history a sample is judged against."""
    same_device = (
        (KernelSample.device == sample.device) if sample.device is not None else KernelSample.device.is_(None)
    )
    query = (
        select(KernelSample)
        .where(
            KernelSample.repository == sample.repository,
            KernelSample.kernel == sample.kernel,
            KernelSample.ref == ref,
            same_device,
        )
        .order_by(KernelSample.created_at.desc(), KernelSample.id.desc())
        .limit(BASE_SAMPLES)
    )
    return list(reversed(list(session.scalars(query))))


@dataclass(frozen=True)
class BaseComparison:
    base_branch: str
    moves: list[KernelMove]
    not_compared: dict[str, str]  # kernel -> why


def compare_job_to_base(session: Session, job_id: str, base_branch: str, min_effect: float) -> BaseComparison:
    """Each kernel the job sampled against the base branch's samples of it (same repository, same device,
    jobs on ``base_branch``), oldest first; a kernel with no such samples is not compared, and says so."""
    mine = select(KernelSample).where(KernelSample.job_id == job_id).order_by(KernelSample.id)
    own = list(session.scalars(mine))
    moves: list[KernelMove] = []
    not_compared: dict[str, str] = {}
    for sample in own:
        base = [b for b in branch_series(session, sample, base_branch) if b.job_id != job_id]
        name = sample.demangled or sample.kernel
        if not base:
            on = f" on {sample.device}" if sample.device else ""
            not_compared[name] = f"no samples on {base_branch}{on}"
            continue
        head = CommitTimes(commit=sample.commit or f"job {job_id}", samples=[sample.median_ns])
        moves.append(compare_to_base(name, commit_times(base), head, min_effect=min_effect))
    return BaseComparison(base_branch=base_branch, moves=moves, not_compared=not_compared)

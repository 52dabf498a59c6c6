"""A pull request's kernels against the base branch: which moved beyond the noise, and by how much (with a
95% interval); ``intelliperf.summary.moves_table`` writes them as the pull request's comment.

The base branch's recent history gives each kernel's level (the commits since its last change point) and
the noise a commit's mean carries on these machines (``changepoints.estimate_noise``); the head commit's
runs are one more commit. A kernel moved when the interval of log(head) - log(base level) excludes zero
and the change is at least ``min_effect``: a step the base history's own scatter would produce is not
reported, however the head's runs happened to fall.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .changepoints import CommitTimes, estimate_noise, find_change_points

__all__ = ["KernelMove", "compare_to_base"]

Z95 = NormalDist().inv_cdf(0.975)


class KernelMove(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kernel: str
    base_ns: float = Field(gt=0, description="The base branch's level: the mean since its last change point")
    head_ns: float = Field(gt=0)
    change: float = Field(description="head / base - 1")
    low: float
    high: float
    base_commits: int = Field(ge=1, description="Commits of the base branch the level rests on")
    moved: bool = Field(description="The interval excludes no change and |change| >= min_effect")


def compare_to_base(
    kernel: str, base: Sequence[CommitTimes], head: CommitTimes, *, min_effect: float = 0.03
) -> KernelMove:
    """``head`` (the pull request's runs) against ``base`` (the base branch's commits, oldest first)."""
    if not base:
        raise ValueError(f"{kernel}: no base-branch history to compare with")
    changes = find_change_points(base)
    recent = list(base[changes[-1].index :] if changes else base)
    noise = estimate_noise([*recent, head]) if len(recent) > 1 else estimate_noise([*base, head])
    level = [float(np.mean(np.log(c.samples))) for c in recent]
    base_log = float(np.mean(level))
    head_log = float(np.mean(np.log(head.samples)))
    head_var = noise.within_sd**2 / len(head.samples) + noise.between_sd**2
    base_var = (noise.within_sd**2 / np.mean([len(c.samples) for c in recent]) + noise.between_sd**2) / len(
        recent
    )
    diff = head_log - base_log
    half = Z95 * math.sqrt(head_var + base_var)
    change = math.expm1(diff)
    low, high = math.expm1(diff - half), math.expm1(diff + half)
    moved = (low > 0 or high < 0) and abs(change) >= min_effect
    return KernelMove(
        kernel=kernel,
        base_ns=math.exp(base_log),
        head_ns=math.exp(head_log),
        change=change,
        low=low,
        high=high,
        base_commits=len(recent),
        moved=moved,
    )

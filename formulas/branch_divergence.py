"""Branch divergence: lanes of a warp that take different paths leave the others idle.

A warp issues each instruction once for all its lanes; where lanes disagree on a branch, the warp
runs each path in turn with only that path's lanes active. The average number of active threads
per executed warp instruction (32 at best on NVIDIA, 64 on AMD's wavefronts) says how much of every
issue slot does work.

Decision: the idle-lane share (1 - active/lanes) times how busy the issue slots are is the time that
reconverged warps could save: a memory-bound kernel's idle lanes cost little. Present when fewer than
24 of 32 lanes (75% of a warp) are active on average (the threshold of Nsight Compute's ThreadDivergence
rule) and the saving is at least 10%.

Localization: per source line, the idle lane-slots of its instructions (lanes x instructions executed
minus thread instructions executed), where the backend attributes counters to instructions.
"""

from __future__ import annotations

from typing import ClassVar

from formulas.base import Formula
from intelliperf.contract import Diagnosis
from intelliperf.contract.gpu_facts import facts_for
from intelliperf.contract.profile import Column, KernelProfile, Quantity, SourceRow

EXECUTED = Column.EXECUTED
THREADS_EXECUTED = Column.THREADS_EXECUTED
ACTIVE_THREADS = Quantity.ACTIVE_THREADS_PER_INSTRUCTION
ISSUE_ACTIVE = Quantity.ISSUE_BUSY_PCT

MAX_ACTIVE_SHARE = 0.75
"""Nsight Compute's ThreadDivergence threshold, 24 of 32 lanes, as a share of the warp (48 of AMD's 64)."""
MIN_SAVING = 0.10


class BranchDivergence(Formula):
    name = "branchDivergence"
    title = "Branch divergence"
    metric_label = "idle lane-slots (32 x warp instructions - thread instructions)"
    metrics: ClassVar[tuple[Quantity, ...]] = (
        ACTIVE_THREADS,
        ISSUE_ACTIVE,
        Quantity.WARP_INSTRUCTIONS,
        Quantity.THREAD_INSTRUCTIONS,
    )

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        lanes = facts_for(kernel.arch).warp_size
        warp = kernel.metric(Quantity.WARP_INSTRUCTIONS)
        return warp * lanes - kernel.metric(Quantity.THREAD_INSTRUCTIONS)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        lanes = facts_for(kernel.arch).warp_size
        active = kernel.metric(ACTIVE_THREADS)
        issue = kernel.metric(ISSUE_ACTIVE) / 100.0
        idle = max(0.0, 1.0 - active / lanes)
        saving = min(1.0, idle * issue)
        numbers = {
            "active_threads_per_instruction": round(active, 3),
            "idle_lane_share": round(idle, 4),
            "issue_active": round(issue, 4),
        }
        reasoning = (
            f"{active:.1f} of {lanes} lanes are active per executed instruction on average (threshold "
            f"{MAX_ACTIVE_SHARE * lanes:g}); the issue slots are {issue:.0%} busy, so warps with all lanes "
            f"on one path could save ~{saving:.0%} of the kernel's time (threshold {MIN_SAVING:.0%})"
        )
        if active >= MAX_ACTIVE_SHARE * lanes or saving < MIN_SAVING:
            return self.absent(kernel, reasoning, numbers)
        return self.present(
            kernel,
            saving,
            summary=(
                f"warps run with {active:.1f} of {lanes} lanes active on average: lanes take different "
                f"branches and each path runs with the others idle"
            ),
            reasoning=reasoning,
            metrics=numbers,
            locations=self.hot_lines(
                kernel, lambda row: _idle_lane_slots(row, lanes), label="idle lane-slots", numbers=_line
            ),
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "A warp executes both sides of a branch its lanes disagree on, one after the other, with the "
            "lanes of the other side idle. Typical fixes: make the branch condition uniform per warp "
            "(map work so that the 32 lanes of a warp take the same path, e.g. sort or bin work items by "
            "kind, or assign items by warp instead of by lane); hoist common work out of the branches; "
            f"replace short branches with arithmetic selects. {diagnosis.summary}."
        )


def _idle_lane_slots(row: SourceRow, lanes: int) -> float:
    return max(0.0, row.get(EXECUTED) * lanes - row.get(THREADS_EXECUTED))


def _line(row: SourceRow) -> dict[str, float]:
    executed = row.get(EXECUTED)
    return {
        "active threads per instruction": round(row.get(THREADS_EXECUTED) / executed, 2) if executed else 0.0
    }

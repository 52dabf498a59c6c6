"""Shared-memory bank conflicts: a warp's shared access split into several wavefronts.

Decision. Nsight Compute computes, per shared-memory instruction, the wavefronts a conflict-free
access would need ("L1 Wavefronts Shared Ideal") and the ones beyond that ("... Excessive"). The
excess share of all shared wavefronts says how much of the shared-memory traffic is conflict
overhead; the shared pipe's utilization says how much that traffic costs the kernel. Estimated
saving = excess share x shared-pipe utilization.

Present when the excess share is at least 20% (one extra wavefront per four accesses: the
padded transpose and the sequential-address reduction measure 0%, their conflicting originals
93% and 65%) and the estimated saving is at least 5% of the kernel's time (conflicts on an idle
shared pipe are not a bottleneck).
"""

from __future__ import annotations

from typing import ClassVar

from formulas.base import Formula, KernelProfile, SourceRow, severity_for
from intelliperf.contract import Diagnosis

EXCESSIVE = "L1 Wavefronts Shared Excessive"
WAVEFRONTS = "L1 Wavefronts Shared"
IDEAL = "L1 Wavefronts Shared Ideal"
SHARED_PIPE_PCT = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.pct_of_peak_sustained_elapsed"

MIN_EXCESS_SHARE = 0.20
MIN_SAVING = 0.05


class BankConflict(Formula):
    name = "bankConflict"
    title = "Shared-memory bank conflicts"
    metric_label = "excessive shared-memory wavefronts"
    metrics: ClassVar[tuple[str, ...]] = (
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
        SHARED_PIPE_PCT,
        "smsp__inst_executed_op_shared_ld.sum",
        "smsp__inst_executed_op_shared_st.sum",
    )

    def bottleneck_metric(self, kernel: KernelProfile) -> float:
        return kernel.instruction_total(EXCESSIVE)

    def diagnose(self, kernel: KernelProfile) -> Diagnosis:
        excessive = kernel.instruction_total(EXCESSIVE)
        wavefronts = kernel.instruction_total(WAVEFRONTS)
        pipe = kernel.metric(SHARED_PIPE_PCT) / 100.0
        numbers = {
            "excessive_wavefronts": excessive,
            "shared_wavefronts": wavefronts,
            "ideal_wavefronts": kernel.instruction_total(IDEAL),
            "shared_pipe_utilization": round(pipe, 4),
            "bank_conflicts_ld": kernel.metric("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"),
            "bank_conflicts_st": kernel.metric("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        }
        if wavefronts <= 0:
            return self.absent(kernel, "the kernel makes no shared-memory accesses", numbers)
        share = excessive / wavefronts
        saving = min(1.0, share * pipe)
        numbers["excess_share"] = round(share, 4)
        reasoning = (
            f"{share:.0%} of {wavefronts:,.0f} shared wavefronts are excessive (threshold "
            f"{MIN_EXCESS_SHARE:.0%}); shared pipe {pipe:.0%} busy, so removing the conflicts could "
            f"save ~{saving:.0%} of the kernel's time (threshold {MIN_SAVING:.0%})"
        )
        if share < MIN_EXCESS_SHARE or saving < MIN_SAVING:
            return self.absent(kernel, reasoning, numbers)
        locations = self.hot_lines(
            kernel, lambda row: row.get(EXCESSIVE), label=EXCESSIVE, numbers=_line_numbers
        )
        ways = wavefronts / max(kernel.instruction_total(IDEAL), 1.0)
        return Diagnosis(
            kernel=kernel.name,
            formula=self.name,
            present=True,
            severity=severity_for(saving, True),
            estimated_saving_ns=saving * kernel.duration_ns,
            estimated_saving_fraction=round(saving, 4),
            summary=(
                f"shared-memory accesses need {ways:.1f}x the ideal wavefronts: {share:.0%} of shared "
                f"traffic is bank-conflict overhead"
            ),
            reasoning=reasoning,
            metrics=numbers,
            locations=locations,
        )

    def prompt_context(self, diagnosis: Diagnosis) -> str:
        return (
            "Shared memory has 32 banks of 4 bytes; a warp's access is split into one wavefront per "
            "distinct address in the same bank. Typical fixes: pad 2-D tiles by one element per row "
            "(tile[32][33]), use sequential instead of strided indexing in reductions, or swizzle the "
            f"index. {diagnosis.summary}."
        )


def _line_numbers(row: SourceRow) -> dict[str, float]:
    return {WAVEFRONTS: row.get(WAVEFRONTS), IDEAL: row.get(IDEAL)}

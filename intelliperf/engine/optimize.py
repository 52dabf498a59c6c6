"""The optimization loop: ask the model for a rewrite, judge it, tell the model what happened, repeat.

Each round renders one prompt (the GPU, the bottleneck, the source with its hot lines marked, every
earlier attempt's outcome) and asks for ``per_round`` candidates (best-of-N). The loop stops after the
first round with a success or once ``attempts_allowed`` replies were tried; the best success (highest
median speedup) is the result. An error that is not the candidate's (the LLM provider, the reference,
the profiler) stops the loop; what was learned so far is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from intelliperf.contract import Attempt
from intelliperf.engine.candidate import CandidateTree, Target, evaluate
from intelliperf.engine.judge import Judge
from intelliperf.engine.progress import Progress
from intelliperf.errors import IntelliPerfError
from intelliperf.gpu.backend import GpuBackend
from intelliperf.llm.prompts import (
    TRITON_NOTE,
    render_attempts,
    render_device,
    render_metrics,
    render_regions,
    render_source,
)
from intelliperf.llm.proposer import ProposalRequest, Proposer

__all__ = ["LoopResult", "build_request", "describe_attempt", "run_loop"]


@dataclass(frozen=True)
class LoopResult:
    attempts: list[Attempt]
    status: Literal["success", "exhausted", "aborted"]
    note: str
    best: Attempt | None = None
    best_files: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None


def build_request(target: Target, attempts: list[Attempt]) -> ProposalRequest:
    kernel = target.kernel
    bottleneck = (
        f"Kernel {kernel.demangled}: {kernel.launches} launch(es), {kernel.mean_ns / 1e3:.1f} us each, "
        f"{kernel.share:.0%} of the application's GPU time.\n"
        f"{render_metrics(target.diagnosis)}\n"
        f"The rewrite must reduce the {target.formula.metric_label}: {target.metric_before:.4g} now."
    )
    regions = render_regions(target.regions)
    if regions:
        bottleneck = f"{bottleneck}\n{regions}"
    source = "\n\n".join(
        render_source(path, text, target.diagnosis) for path, text in sorted(target.sources.items())
    )
    guidance = target.formula.prompt_context(target.diagnosis)
    if any(path.endswith(".py") for path in target.sources):
        guidance = f"{guidance}\n{TRITON_NOTE}"
    return ProposalRequest(
        formula=target.formula.name,
        guidance=guidance,
        gpu=render_device(target.device),
        bottleneck=bottleneck,
        source=source,
        attempts=render_attempts(attempts),
    )


def describe_attempt(attempt: Attempt) -> str:
    speedup = attempt.speedup
    if attempt.status == "success" and speedup is not None:
        return (
            f"success: {speedup.median:.3f}x (95% interval {speedup.low:.3f} to {speedup.high:.3f}), "
            f"metric {attempt.metric_before:.4g} → {attempt.metric_after:.4g}"
        )
    first_line = (attempt.reason or "").strip().splitlines()[:1]
    return f"{attempt.status.replace('_', ' ')}" + (f": {first_line[0][:160]}" if first_line else "")


def _best(attempts: list[Attempt]) -> Attempt | None:
    successes = [a for a in attempts if a.status == "success" and a.speedup is not None]
    return max(successes, key=lambda a: a.speedup.median if a.speedup else 0.0, default=None)


def run_loop(
    target: Target,
    *,
    attempts_allowed: int,
    per_round: int,
    proposer: Proposer,
    judge: Judge,
    backend: GpuBackend,
    tree: CandidateTree,
    progress: Progress,
) -> LoopResult:
    attempts: list[Attempt] = []
    files: dict[int, dict[str, str]] = {}
    say: Callable[[str], None] = progress.note
    stage: str | None = None
    try:
        stage = "reference"
        progress.start(stage, f"{judge.label}: the original's verdict, once for every candidate")
        judge.prepare(say)
        progress.done(stage, "ready")
        round_ = 0
        while len(attempts) < attempts_allowed:
            round_ += 1
            request = build_request(target, attempts)
            for _ in range(min(per_round, attempts_allowed - len(attempts))):
                index = len(attempts) + 1
                stage = f"attempt {index}/{attempts_allowed}"
                progress.start(stage, "asking the model for a rewrite")
                proposal = proposer.propose(request)
                say(f"reply received ({proposal.tokens_out or '?'} tokens, {proposal.seconds:.1f} s)")
                evaluated = evaluate(
                    proposal,
                    index=index,
                    round_=round_,
                    target=target,
                    tree=tree,
                    judge=judge,
                    backend=backend,
                    say=say,
                )
                attempts.append(evaluated.attempt)
                files[index] = evaluated.new_files
                progress.done(stage, describe_attempt(evaluated.attempt))
                stage = None
            if any(a.round == round_ and a.status == "success" for a in attempts):
                break
    except IntelliPerfError as error:
        if stage is not None:
            progress.done(stage, f"stopped: {error.message}")
        best = _best(attempts)
        return LoopResult(
            attempts=attempts,
            status="aborted",
            note=f"the loop stopped after {len(attempts)} attempt(s): {error}",
            best=best,
            best_files=files.get(best.index, {}) if best else {},
            exit_code=error.exit_code,
        )
    finally:
        tree.restore()
    best = _best(attempts)
    if best is None:
        return LoopResult(
            attempts=attempts,
            status="exhausted",
            note=f"no validated improvement in {len(attempts)} attempt(s)",
        )
    return LoopResult(
        attempts=attempts,
        status="success",
        note=f"attempt {best.index} is correct, faster and removes the bottleneck",
        best=best,
        best_files=files[best.index],
    )

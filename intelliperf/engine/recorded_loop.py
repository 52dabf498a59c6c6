"""The optimization loop replayed from a GPU run: for machines without a GPU (CI, demos, the service's
end-to-end tests). Everything runs for real (the builds, the LLM client against its server, the edits)
except what needs the GPU: Accordo's verdicts and timings, and the counter pass's counters, which come
from a recording of the same candidates on the GPU machine.

A recording folder holds ``original/`` (the profile the diagnosis reads), ``fixed/`` (the profile every
later counter pass reads: a candidate's) and ``loop-report.json`` (the report of the GPU run, whose
attempts carry each candidate's diff, validation and speedup). A candidate whose diff the GPU never
judged is an error, not a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from intelliperf.contract import JobSpec, RankedKernel, Report, ValidationResult
from intelliperf.contract.profile import KernelProfile
from intelliperf.edits import unified_diff
from intelliperf.engine.candidate import Target
from intelliperf.errors import ValidationError
from intelliperf.gpu.replay import ReplayBackend

__all__ = ["LOOP_REPORT", "CandidateCounters", "RecordedJudge", "is_loop_recording"]

LOOP_REPORT = "loop-report.json"


def is_loop_recording(folder: Path) -> bool:
    return (folder / LOOP_REPORT).is_file() and (folder / "original").is_dir() and (folder / "fixed").is_dir()


class CandidateCounters(ReplayBackend):
    """The diagnosis reads ``original``; every later counter pass (a candidate's) reads ``candidate``."""

    def __init__(self, original: Path, candidate: Path) -> None:
        super().__init__(original)
        self.candidate = ReplayBackend(candidate)
        self.collected = 0

    def collect(self, argv: Sequence[str], **kw: object) -> dict[str, KernelProfile]:  # type: ignore[override]
        self.collected += 1
        source = self if self.collected == 1 else self.candidate
        return ReplayBackend.collect(source, argv, **kw)  # type: ignore[arg-type]


class RecordedJudge:
    """Accordo's verdicts from the GPU run of the same candidates, found by the candidate's diff."""

    def __init__(self, recorded: Report, reference_dir: Path) -> None:
        self.reference_dir = reference_dir
        self.files = sorted({name for attempt in recorded.attempts for name in attempt.files})
        self.verdicts = {a.diff: a.validation for a in recorded.attempts if a.diff and a.validation}
        self.prepared = 0
        self.checked: list[str] = []

    @classmethod
    def factory(cls, folder: Path, judges: list[RecordedJudge] | None = None):  # type: ignore[no-untyped-def]
        """A judge factory for intelliperf.engine.job.run_job; ``judges`` collects what it made."""
        recorded = Report.model_validate_json((folder / LOOP_REPORT).read_text())

        def make(target: Target, reference_dir: Path, spec: JobSpec) -> RecordedJudge:
            judge = cls(recorded, reference_dir)
            if judges is not None:
                judges.append(judge)
            return judge

        return make

    label = "Accordo (its recorded verdicts)"

    def prepare(self, say: object) -> None:
        self.prepared += 1

    def _recorded(self, candidate_dir: Path) -> ValidationResult:
        diff = unified_diff(
            {
                name: ((self.reference_dir / name).read_text(), (candidate_dir / name).read_text())
                for name in self.files
            }
        )
        verdict = self.verdicts.get(diff)
        if verdict is None:
            raise ValidationError(
                "the recording holds no GPU verdict for this candidate (a replayed loop judges only the "
                "candidates the GPU judged)",
                log_tail=diff[-2000:],
            )
        self.checked.append(diff)
        return verdict

    def check(self, candidate_dir: Path, say: object) -> ValidationResult:
        return self._recorded(candidate_dir).model_copy(update={"speedup": None})

    def time(self, candidate_dir: Path, say: object, checked: ValidationResult) -> ValidationResult:
        recorded = self.verdicts[self.checked[-1]]
        if recorded is None or recorded.speedup is None:
            raise ValidationError("the recorded verdict of this candidate has no timing")
        return recorded

    def candidate_kernel(self, candidate_dir: Path) -> RankedKernel | None:
        return None

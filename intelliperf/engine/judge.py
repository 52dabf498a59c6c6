"""The optimization loop's judge: Accordo, with the reference captured once for every candidate.

``Judge`` is the seam the loop talks to; ``AccordoJudge`` runs on the GPU; ``UnittestJudge``
(unittest_judge.py) rules by the project's own tests instead. Tests without a GPU stand a
judge in that replays results recorded on the GPU machine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from accordo.validate import (
    Reference,
    ValidationOptions,
    capture_reference,
    check_candidate,
    judge_timing,
)
from intelliperf.contract import JobSpec, RankedKernel, ValidationResult
from intelliperf.settings import get_settings

__all__ = ["AccordoJudge", "Judge", "options_for"]

Say = Callable[[str], None]


class Judge(Protocol):
    label: str
    """Who judges, in words for the progress display ('Accordo', "the project's tests")."""

    def prepare(self, say: Say) -> None:
        """Capture the reference (once, before the first candidate)."""

    def check(self, candidate_dir: Path, say: Say) -> ValidationResult:
        """Is the candidate built in ``candidate_dir`` correct? (No timing.)"""

    def time(self, candidate_dir: Path, say: Say, checked: ValidationResult) -> ValidationResult:
        """How much faster is the candidate ``check`` passed than the reference? ``checked`` with its
        speedup, or a failed verdict when a check that runs with the timing fails."""

    def candidate_kernel(self, candidate_dir: Path) -> RankedKernel | None:
        """The target kernel as the candidate launches it, when the rewrite may rename it (a new
        signature); None: the reference's kernel."""


def options_for(spec: JobSpec) -> ValidationOptions:
    tolerances = spec.tolerances
    return ValidationOptions(
        atol=tolerances.atol,
        rtol=tolerances.rtol,
        calibration_runs=tolerances.calibration_runs,
        noise_runs=tolerances.noise_runs,
        alpha=tolerances.alpha,
        runs=tolerances.timing_runs,
        min_runs=min(tolerances.min_timing_runs, tolerances.timing_runs),
        timeout_s=spec.timeouts.run_s,
        element_type=tolerances.dtype,
        capture_budget_bytes=get_settings().capture_budget_bytes,
    )


class AccordoJudge:
    """Validates candidates of ``kernel`` (its mangled name) run as ``command`` in their own copy of the
    project, against the same command in ``reference_dir``. With ``reproducers``, each timed candidate's
    reproducer is saved in ``reproducers/attempt-<n>`` (n counts timed candidates from 1)."""

    label = "Accordo"

    def __init__(
        self,
        kernel: str,
        command: Sequence[str],
        reference_dir: Path,
        options: ValidationOptions,
        reproducers: Path | None = None,
    ) -> None:
        self.kernel = kernel
        self.command = list(command)
        self.reference_dir = reference_dir
        self.options = options
        self.reproducers = reproducers
        self._reference: Reference | None = None
        self._work: tempfile.TemporaryDirectory[str] | None = None  # the checked candidate's replay files
        self._timed = 0

    def prepare(self, say: Say) -> None:
        if self._reference is None:
            self._reference = capture_reference(
                self.kernel, self.command, cwd=self.reference_dir, options=self.options, progress=say
            )

    def _ready(self, say: Say) -> Reference:
        self.prepare(say)
        assert self._reference is not None
        return self._reference

    def _candidate_options(self, reference: Reference) -> ValidationOptions:
        return replace(self.options, timeout_s=reference.candidate_timeout(self.options.timeout_s))

    def check(self, candidate_dir: Path, say: Say) -> ValidationResult:
        reference = self._ready(say)
        options = self._candidate_options(reference)
        if self._work is not None:
            self._work.cleanup()
        self._work = tempfile.TemporaryDirectory(prefix="intelliperf-judge-")
        return check_candidate(
            reference, self.command, cwd=candidate_dir, options=options, progress=say, workdir=self._work.name
        )

    def time(self, candidate_dir: Path, say: Say, checked: ValidationResult) -> ValidationResult:
        reference = self._ready(say)
        options = self._candidate_options(reference)
        self._timed += 1
        folder = self.reproducers / f"attempt-{self._timed}" if self.reproducers is not None else None
        return judge_timing(
            reference,
            self.command,
            checked,
            cwd=candidate_dir,
            options=options,
            progress=say,
            workdir=self._work.name if self._work is not None else None,
            reproducer_dir=folder,
        )

    def candidate_kernel(self, candidate_dir: Path) -> RankedKernel | None:
        return None  # Accordo compared this very kernel, launch by launch

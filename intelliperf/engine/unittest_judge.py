"""The project's own tests as the judge (``--unittest_command``), for rewrites that change more than a kernel.

Accordo compares a kernel's buffers launch by launch, so a rewrite that changes a data layout (and with it
the host code and the kernel's inputs) is rightly an ``input_mismatch`` there. With a unittest command the
candidate tree is correct when that command exits 0 in it (its output is the reason when it does not), and
the speedup is the application's kernel time for the same kernel *function* in reference and candidate runs
(interleaved, as Accordo times; the signature, and so the mangled name, may change).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from accordo.speedup import measure_speedup
from accordo.trace import run_traced
from accordo.validate import ValidationOptions
from intelliperf.contract import RankedKernel, Speedup, ValidationResult
from intelliperf.errors import ProfileError, SpecError, tail
from intelliperf.gpu.backend import rank_kernels
from intelliperf.gpu.kernel_names import function_name
from intelliperf.process import describe_exit, run_process

__all__ = ["UnittestJudge", "function_regex"]

Say = Callable[[str], None]
OUTPUT_TAIL = 40


def function_regex(demangled: str) -> str:
    """A regex for every mangled or plain name of the kernel function ``demangled`` names, whatever its
    parameters: `_Z11scale_fieldPKfPfif` and `_Z11scale_fieldPKfS0_Pfif` (Itanium ABI: the name's length,
    then the name, in or out of namespaces), or the bare name of a Triton or `extern "C"` kernel."""
    name = function_name(demangled)
    return rf"^(?:_Z(?:N\w*?)?{len(name)}{re.escape(name)}|{re.escape(name)}$)"


class UnittestJudge:
    """Judges the candidate tree by ``test_command`` (a shell command run in the tree's project folder)."""

    label = "the project's tests"

    def __init__(
        self,
        kernel: RankedKernel,
        command: Sequence[str],
        test_command: str,
        reference_dir: Path,
        options: ValidationOptions,
    ) -> None:
        self.kernel = kernel
        self.command = list(command)
        self.test_command = test_command
        self.reference_dir = reference_dir
        self.options = options
        self.pattern = function_regex(kernel.demangled)
        self._prepared = False

    def _run_tests(self, tree: Path) -> tuple[bool, str]:
        done = run_process(self.test_command, cwd=tree, timeout_s=self.options.timeout_s, shell=True)
        output = tail(done.output, OUTPUT_TAIL)
        if done.ok:
            return True, output
        how = describe_exit(done.returncode, done.timed_out, self.options.timeout_s)
        return False, f"`{self.test_command}` {how}:\n{output}"

    def prepare(self, say: Say) -> None:
        """The tests must pass on the unchanged project, or no candidate's failure would mean anything."""
        if self._prepared:
            return
        say(f"running the project's tests on the original: {self.test_command}")
        passed, why = self._run_tests(self.reference_dir)
        if not passed:
            raise SpecError(
                f"the unittest command fails on the unchanged project, so it cannot judge a rewrite: {why}",
                hint="give a --unittest_command that passes before any change (run it in the project folder)",
            )
        self._prepared = True

    def check(self, candidate_dir: Path, say: Say) -> ValidationResult:
        self.prepare(say)
        say(f"running the project's tests: {self.test_command}")
        passed, why = self._run_tests(candidate_dir)
        return ValidationResult(
            kernel=self.kernel.name,
            passed=passed,
            reason=None if passed else f"the project's tests fail on the rewrite: {why}",
            failure=None if passed else "tests_failed",
            judge="unittest",
        )

    def time(self, candidate_dir: Path, say: Say) -> Speedup:
        say(f"timing reference and candidate, up to {self.options.runs} runs each, interleaved")
        return measure_speedup(
            self.command,
            self.command,
            kernel_regex=self.pattern,
            runs=self.options.runs,
            min_runs=self.options.min_runs,
            timeout_s=self.options.timeout_s,
            reference_cwd=self.reference_dir,
            candidate_cwd=candidate_dir,
            progress=say,
            timer=self.options.timer,
            warmup_launches=self.options.warmup_launches,
        )

    def candidate_kernel(self, candidate_dir: Path) -> RankedKernel:
        """The kernel in the candidate's run: the same function, perhaps with another signature (one traced
        run), so its bottleneck metric can be measured again."""
        run = run_traced(self.command, cwd=candidate_dir, timeout_s=self.options.timeout_s)
        pattern = re.compile(self.pattern)
        found = [k for k in rank_kernels(run.stats) if pattern.search(k.name)]
        if not found:
            name = function_name(self.kernel.demangled)
            raise ProfileError(f"the candidate's run launched no kernel named {name}")
        return found[0]

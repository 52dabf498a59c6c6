"""The project's own tests as the judge (``--unittest_command``), for rewrites that change more than a kernel.

Accordo compares a kernel's buffers launch by launch, so a rewrite that changes a data layout (and with it
the host code and the kernel's inputs) is rightly an ``input_mismatch`` there. With a unittest command the
candidate tree is correct when that command exits 0 in it (its output is the reason when it does not), and
the speedup is the application's kernel time for the same kernel *function* in reference and candidate runs
(interleaved, as Accordo times; the signature, and so the mangled name, may change). Files the application
writes (``applications[].output_files``) are compared too, with Accordo's tolerance model
(intelliperf.engine.output_files): the original is run ``calibration_runs`` times (up to ``noise_runs``
when those disagree) once, each candidate once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

from accordo.speedup import interleaved_speedup, measure_speedup
from accordo.validate import ValidationOptions
from intelliperf.contract import RankedKernel, Speedup, ValidationResult
from intelliperf.contract.kernel_names import function_name
from intelliperf.engine.output_files import compare_file, disagree, snapshot
from intelliperf.errors import ProfileError, SpecError, tail
from intelliperf.gpu.backend import GpuBackend, rank_kernels
from intelliperf.process import describe_exit, run_process
from profiler.trace import run_traced

__all__ = ["UnittestJudge", "function_regex"]

Say = Callable[[str], None]
OUTPUT_TAIL = 40


def function_regex(demangled: str) -> str:
    """A regex for every mangled or plain name of the kernel function ``demangled`` names, whatever its
    parameters: `_Z11scale_fieldPKfPfif` and `_Z11scale_fieldPKfS0_Pfif` (Itanium ABI: the name's length,
    then the name, in or out of namespaces), or the bare name of a Triton or `extern "C"` kernel."""
    name = function_name(demangled)
    return rf"^(?:_Z(?:N\w*?)?{len(name)}{re.escape(name)}|{re.escape(name)}$)"


class _AppRunError(Exception):
    pass


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
        output_files: Sequence[str] = (),
        timing: GpuBackend | None = None,
    ) -> None:
        """``timing``: the backend whose timing pass times the kernel where Accordo cannot (AMD); None:
        Accordo's CUDA timer."""
        self.kernel = kernel
        self.command = list(command)
        self.test_command = test_command
        self.reference_dir = reference_dir
        self.options = options
        self.output_files = list(output_files)
        self.timing = timing
        self.pattern = function_regex(kernel.demangled)
        self._prepared = False
        self._reference_outputs: list[dict] = []

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
        if self.output_files:
            self._reference_outputs = self._calibrate(say)
        self._prepared = True

    def _run_app(self, tree: Path) -> dict:
        """One run of the application in ``tree`` and the numbers of the files it wrote (stale copies are
        removed first); _AppRunError with the reason when it fails or writes no such file."""
        for name in self.output_files:
            (tree / name).unlink(missing_ok=True)
        done = run_process(self.command, cwd=tree, timeout_s=self.options.timeout_s)
        if not done.ok:
            how = describe_exit(done.returncode, done.timed_out, self.options.timeout_s)
            raise _AppRunError(f"the application {how}:\n{tail(done.output, OUTPUT_TAIL)}")
        try:
            return snapshot(tree, self.output_files)
        except (FileNotFoundError, ValueError) as error:
            raise _AppRunError(str(error)) from None

    def _calibrate(self, say: Say) -> list[dict]:
        runs = self.options.calibration_runs
        say(f"running the original {runs} times for its output files: {', '.join(self.output_files)}")
        try:
            outputs = [self._run_app(self.reference_dir) for _ in range(runs)]
            if disagree(outputs) and self.options.noise_runs > runs:
                say(f"its runs disagree: {self.options.noise_runs} runs in all to measure their noise")
                outputs += [self._run_app(self.reference_dir) for _ in range(self.options.noise_runs - runs)]
        except _AppRunError as error:
            raise SpecError(f"the output files cannot be compared: on the original, {error}") from None
        return outputs

    def check(self, candidate_dir: Path, say: Say) -> ValidationResult:
        self.prepare(say)
        say(f"running the project's tests: {self.test_command}")
        passed, why = self._run_tests(candidate_dir)
        if not passed:
            return self._verdict(f"the project's tests fail on the rewrite: {why}", "tests_failed")
        if self.output_files:
            return self._compare_outputs(candidate_dir, say)
        return self._verdict(None, None)

    def _verdict(self, reason: str | None, failure: str | None) -> ValidationResult:
        return ValidationResult.model_validate(
            {
                "kernel": self.kernel.name,
                "passed": reason is None,
                "reason": reason,
                "failure": failure,
                "judge": "unittest",
            }
        )

    def _compare_outputs(self, candidate_dir: Path, say: Say) -> ValidationResult:
        say(f"comparing the output files: {', '.join(self.output_files)}")
        try:
            written = self._run_app(candidate_dir)
        except _AppRunError as error:
            return self._verdict(f"the rewrite's output files could not be compared: {error}", "crash")
        reasons = []
        for name in self.output_files:
            verdict = compare_file(
                name,
                [run[name] for run in self._reference_outputs],
                written[name],
                atol=self.options.atol,
                rtol=self.options.rtol,
                alpha=self.options.alpha,
            )
            if verdict.reason is not None:
                reasons.append(verdict.reason)
        if reasons:
            return self._verdict(
                "the project's tests pass, but the output files differ: " + "; ".join(reasons), "mismatch"
            )
        return self._verdict(None, None)

    def time(self, candidate_dir: Path, say: Say, checked: ValidationResult) -> ValidationResult:
        return checked.model_copy(update={"speedup": self._speedup(candidate_dir, say)})

    def _speedup(self, candidate_dir: Path, say: Say) -> Speedup:
        say(f"timing reference and candidate, up to {self.options.runs} runs each, interleaved")
        if self.timing is not None:
            return self._time_with_backend(self.timing, candidate_dir, say)
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

    def _same_function(self, kernel: RankedKernel) -> bool:
        return function_name(kernel.demangled) == function_name(self.kernel.demangled)

    def _time_with_backend(self, backend: GpuBackend, candidate_dir: Path, say: Say) -> Speedup:
        """Interleaved runs timed by the backend's timing pass: a run's kernel time is the total of every
        launch of the kernel function (the same statistics as Accordo's timer, accordo.speedup)."""
        trees = {"reference": self.reference_dir, "candidate": candidate_dir}

        def time_run(side: str, i: int) -> tuple[float, float, int]:
            timing = backend.time_kernels(self.command, cwd=trees[side], timeout_s=self.options.timeout_s)
            mine = [k for k in rank_kernels(timing.kernels) if self._same_function(k)]
            if not mine:
                name = function_name(self.kernel.demangled)
                raise ProfileError(f"the {side}'s run {i + 1} launched no kernel named {name}")
            return float(sum(k.total_ns for k in mine)), timing.wall_s, sum(k.launches for k in mine)

        result = interleaved_speedup(
            time_run, runs=self.options.runs, min_runs=max(2, self.options.min_runs), progress=say
        )
        method = (
            f"{backend.tracer}: kernel time summed over all launches per run; reference and candidate runs "
            "interleaved (ABAB); median of per-pair ratios; 95% Student-t interval of the mean log ratio"
        )
        return result.model_copy(update={"method": method})

    def candidate_kernel(self, candidate_dir: Path) -> RankedKernel:
        """The kernel in the candidate's run: the same function, perhaps with another signature (one traced
        run), so its bottleneck metric can be measured again."""
        timeout = self.options.timeout_s
        if self.timing is not None:
            kernels = self.timing.time_kernels(self.command, cwd=candidate_dir, timeout_s=timeout).kernels
            found = [k for k in rank_kernels(kernels) if self._same_function(k)]
        else:
            run = run_traced(self.command, cwd=candidate_dir, timeout_s=timeout)
            pattern = re.compile(self.pattern)
            found = [k for k in rank_kernels(run.stats) if pattern.search(k.name)]
        if not found:
            name = function_name(self.kernel.demangled)
            raise ProfileError(f"the candidate's run launched no kernel named {name}")
        return found[0]

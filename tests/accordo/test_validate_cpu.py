"""The parts of `validate` that need no GPU: options, the CLI's errors, and how a crashed or hung
candidate (recorded captures) becomes a verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import accordo.validate
from accordo.capture import CaptureRun, read_capture
from accordo.validate import Reference, ValidationOptions, _candidate_failure, capture_reference
from intelliperf.cli import app

RECORDED = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "captures" / "block_sum"


def recorded_run(name: str, status: str, returncode: int | None, message: str, stderr: str) -> CaptureRun:
    capture = read_capture(RECORDED / f"{name}.bin")
    return CaptureRun(status, returncode, None, message, "", stderr, stderr, 1.0, (capture,), capture)  # type: ignore[arg-type]


def test_crashed_candidate_is_a_crash_verdict_with_its_stderr() -> None:
    run = recorded_run(
        "segfault", "crash", -11, "`bin/segfault` was killed by SIGSEGV (exit status -11)", "boom\n"
    )
    result = _candidate_failure("block_sum", run, ValidationOptions())
    assert result is not None and not result.passed and result.failure == "crash"
    assert "SIGSEGV" in result.reason and "boom" in result.reason
    assert "(1 launch of the kernel captured before that)" in result.reason


def test_hung_candidate_is_a_timeout_verdict() -> None:
    capture = read_capture(RECORDED / "hang.bin")
    launch = capture.launches[0]
    assert launch.buffer(0, "before") is not None and launch.buffer(0, "after") is None
    run = recorded_run("hang", "timeout", None, "`bin/hang` did not finish within 10 s and was killed", "")
    result = _candidate_failure("block_sum", run, ValidationOptions())
    assert result is not None and result.failure == "timeout" and "within 10 s" in result.reason


def test_finished_candidate_is_not_judged_here() -> None:
    run = recorded_run("fixed_good", "ok", 0, "exited with code 0", "")
    assert _candidate_failure("block_sum", run, ValidationOptions()) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"atol": -1}, "atol"),
        ({"calibration_runs": 0}, "calibration_runs"),
        ({"runs": 1}, "runs"),
        ({"element_type": "float128"}, "unknown element type"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"noise_runs": 1}, "noise_runs"),
        ({"alpha": 0.0}, "alpha"),
        ({"alpha": 0.7}, "alpha"),
    ],
)
def test_options_are_checked(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ValidationOptions(**kwargs)


def test_cli_rejects_bad_options_before_running_anything() -> None:
    runner = CliRunner()
    base = ["validate", "-k", "block_sum", "--reference", "bin/ref", "--candidate", "bin/x"]
    bad_type = runner.invoke(app, [*base, "--dtype", "float128"])
    assert bad_type.exit_code == 2 and "unknown element type 'float128'" in bad_type.output
    bad_quote = runner.invoke(app, ["validate", "-k", "k", "--reference", "'unclosed", "--candidate", "x"])
    assert bad_quote.exit_code == 2 and "quotation" in bad_quote.output
    bad_kernel = runner.invoke(app, ["validate", "-k", "k(", "--reference", "a", "--candidate", "b"])
    assert bad_kernel.exit_code == 2 and "not a valid regex" in bad_kernel.output
    one_run = runner.invoke(app, [*base, "--runs", "1"])
    assert one_run.exit_code == 2
    bad_alpha = runner.invoke(app, [*base, "--alpha", "0.9"])
    assert bad_alpha.exit_code == 2 and "--alpha" in bad_alpha.output
    bad_noise_runs = runner.invoke(app, [*base, "--noise-runs", "1"])
    assert bad_noise_runs.exit_code == 2 and "--noise-runs" in bad_noise_runs.output
    bad_timer = runner.invoke(app, [*base, "--timer", "stopwatch"])
    assert bad_timer.exit_code == 2 and "unknown timer 'stopwatch'; one of: events, cupti" in bad_timer.output


def test_a_candidate_may_run_ten_times_the_slowest_reference_within_the_limit() -> None:
    reference = Reference(kernel="k", command=("./app",), cwd=None, captures=(), wall_s=(0.8, 5.2, 1.0))
    assert reference.candidate_timeout(600) == pytest.approx(52.0)
    assert reference.candidate_timeout(40) == 40  # never beyond the job's run timeout
    quick = Reference(kernel="k", command=("./app",), cwd=None, captures=(), wall_s=(0.3,))
    assert quick.candidate_timeout(600) == 30  # a floor for start-up noise


def test_the_job_spec_tolerances_reach_accordo() -> None:
    from intelliperf.contract import JobSpec
    from intelliperf.engine.judge import options_for

    spec = JobSpec.model_validate(
        {
            "applications": [{"command": "./app"}],
            "tolerances": {
                "atol": 1e-5,
                "rtol": 1e-4,
                "calibration_runs": 4,
                "noise_runs": 30,
                "alpha": 0.001,
            },
        }
    )
    options = options_for(spec)
    assert (options.atol, options.rtol, options.calibration_runs) == (1e-5, 1e-4, 4)
    assert (options.noise_runs, options.alpha) == (30, 0.001)
    defaults = options_for(JobSpec.model_validate({"applications": [{"command": "./app"}]}))
    assert (defaults.noise_runs, defaults.alpha) == (
        ValidationOptions().noise_runs,
        ValidationOptions().alpha,
    )


def _replayed_runs(monkeypatch: pytest.MonkeyPatch, folder: Path, names: list[str]) -> None:
    """accordo.validate's capture runs replay captures recorded on a GPU (none here), in order."""
    replay = iter(names)

    def run_capture(*_args: object, **_kwargs: object) -> CaptureRun:
        capture = read_capture(folder / f"{next(replay)}.bin")
        return CaptureRun("ok", 0, None, "exited with code 0", "", "", "", 0.5, (capture,), capture)

    monkeypatch.setattr(accordo.validate, "run_capture", run_capture)


CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"


def test_a_noisy_reference_is_captured_noise_runs_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replaying the H100's 24 runs of the atomicAdd sum: its first 3 runs disagree, so the reference is
    captured until noise_runs; within a small capture budget it stops early and says why."""
    names = [f"reference-{i}" for i in range(1, 25)]
    _replayed_runs(monkeypatch, CAPTURES / "sums", names)
    said: list[str] = []
    reference = capture_reference(
        "sum", ["bin/ref"], options=ValidationOptions(noise_runs=24, probes=False), progress=said.append
    )
    assert len(reference.captures) == 24
    assert "the reference's runs disagree: measuring its noise over 24 runs" in said

    _replayed_runs(monkeypatch, CAPTURES / "sums", names)
    per_run = reference.captures[0].file_bytes
    said.clear()
    small = capture_reference(
        "sum",
        ["bin/ref"],
        options=ValidationOptions(noise_capture_bytes=5 * per_run, probes=False),
        progress=said.append,
    )
    assert len(small.captures) == 5
    assert any("over 5 runs (24 wanted" in message for message in said)


def test_a_steady_reference_is_captured_calibration_runs_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _replayed_runs(monkeypatch, CAPTURES / "block_sum", ["reference-1", "reference-2", "reference-3"])
    reference = capture_reference("block_sum", ["bin/ref"], options=ValidationOptions(probes=False))
    assert len(reference.captures) == 3

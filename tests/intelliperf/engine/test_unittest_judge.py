"""--unittest_command: the project's own tests judge a rewrite (correctness here; timing is a GPU test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accordo.validate import ValidationOptions
from formulas.registry import get
from intelliperf.action._inputs import GithubContext, build_spec, read_inputs
from intelliperf.cli import _spec_from_options
from intelliperf.contract import Application, JobSpec, RankedKernel
from intelliperf.engine.candidate import Target
from intelliperf.engine.job import judge_for
from intelliperf.engine.judge import AccordoJudge
from intelliperf.engine.recorded_loop import RecordedJudge
from intelliperf.engine.unittest_judge import UnittestJudge, function_regex
from intelliperf.errors import SpecError
from tests.support.reports import make_diagnosis

KERNEL = RankedKernel(
    rank=1,
    name="_Z11scale_fieldPKfPffi",
    demangled="scale_field(float const*, float*, float, int)",
    launches=20,
    total_ns=1000,
    mean_ns=50.0,
    median_ns=50.0,
    share=1.0,
)


@pytest.mark.parametrize(
    ("demangled", "matches", "not_matches"),
    [
        (
            "scale_field(float const*, float*, float, int)",
            ["_Z11scale_fieldPKfPffi", "_Z11scale_fieldPK8ParticlePffi", "_Z11scale_fieldfi"],
            ["_Z12scale_fieldsPKf", "_Z11scale_fielx", "init_particles", "_Z14init_particlesPfij"],
        ),
        (
            "void geom::tile_sums<32>(float2 const*, float*, int)",
            ["_ZN4geom9tile_sumsILi32EEEvPK6float2Pfi", "_ZN4geom9tile_sumsILi8EEEvPK6float2Pfi"],
            ["_ZN4geom10tile_sums2ILi8EEEvPK6float2Pfi"],
        ),
        ("scale_elements", ["scale_elements"], ["scale_elements_2", "_Z5scalePf"]),
    ],
)
def test_the_kernel_function_is_found_whatever_its_signature(
    demangled: str, matches: list[str], not_matches: list[str]
) -> None:
    pattern = re.compile(function_regex(demangled))
    assert all(pattern.search(name) for name in matches)
    assert not any(pattern.search(name) for name in not_matches)


def judge(tmp_path: Path, test_command: str, timeout_s: float = 30) -> UnittestJudge:
    reference = tmp_path / "reference"
    reference.mkdir(exist_ok=True)
    (reference / "ok").write_text("")
    options = ValidationOptions(timeout_s=timeout_s)
    return UnittestJudge(KERNEL, ["./bin/app"], test_command, reference, options)


def test_a_candidate_passes_when_the_tests_exit_0_and_fails_with_their_output(tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    test = "test -f ok && echo all 3 tests passed || { echo 'test_layout: expected 1.5, got 2.5'; exit 1; }"
    unittest = judge(tmp_path, test)
    said: list[str] = []
    failed = unittest.check(candidate, said.append)
    assert not failed.passed and failed.judge == "unittest" and failed.failure == "tests_failed"
    assert failed.reason is not None
    assert "exited with code 1" in failed.reason and "test_layout: expected 1.5, got 2.5" in failed.reason
    assert any("running the project's tests" in line for line in said)
    (candidate / "ok").write_text("")
    passed = unittest.check(candidate, said.append)
    assert passed.passed and passed.reason is None and passed.judge == "unittest"


def test_tests_that_fail_before_any_rewrite_stop_the_loop(tmp_path: Path) -> None:
    unittest = judge(tmp_path, "echo 'no rule to make target test'; exit 2")
    with pytest.raises(SpecError, match="fails on the unchanged project") as caught:
        unittest.prepare(lambda _: None)
    assert "no rule to make target test" in caught.value.message


def test_tests_that_hang_fail_the_candidate_with_the_time_limit(tmp_path: Path) -> None:
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    unittest = judge(tmp_path, "test -f ok || sleep 30", timeout_s=1)
    result = unittest.check(candidate, lambda _: None)
    assert not result.passed and result.reason is not None and "timed out after 1 s" in result.reason


def target() -> Target:
    diagnosis = make_diagnosis(KERNEL.name, "memoryAccess", saving_ns=10.0)
    return Target(
        kernel=KERNEL,
        formula=get("memoryAccess")(),
        diagnosis=diagnosis,
        metric_before=1.0,
        device=None,
        command=["./bin/app"],
        build_command="make",
        build_timeout_s=60,
        counters_timeout_s=60,
        sources={"app.cu": ""},
    )


def test_every_judge_speaks_the_loops_protocol() -> None:
    """The loop names the judge in its progress and asks each for the candidate's kernel."""
    for judge_class in (AccordoJudge, UnittestJudge, RecordedJudge):
        assert isinstance(judge_class.label, str) and judge_class.label
        for method in ("prepare", "check", "time", "candidate_kernel"):
            assert callable(getattr(judge_class, method)), (judge_class, method)


def test_the_spec_decides_the_judge(tmp_path: Path) -> None:
    app = [Application(command=["./bin/app"])]
    assert isinstance(judge_for(target(), tmp_path, JobSpec(applications=app)), AccordoJudge)
    chosen = judge_for(target(), tmp_path, JobSpec(applications=app, unittest_command="make test"))
    assert isinstance(chosen, UnittestJudge) and chosen.test_command == "make test"


def test_the_cli_and_the_action_carry_the_unittest_command() -> None:
    spec = _spec_from_options(
        ["./bin/app"],
        build_command="make",
        instrument_command=None,
        project_directory=Path("."),
        formula="auto",
        top_n=10,
        num_attempts=3,
        candidates=1,
        tolerance=None,
        model="m",
        provider="openai",
        api_base=None,
        kernel=None,
        in_place=False,
        unittest_command="./check.sh",
        compare_files=["out/a.txt", "b.npy"],
    )
    assert spec.unittest_command == "./check.sh"
    assert spec.applications[0].output_files == ["out/a.txt", "b.npy"]
    env = {
        "INPUT_SERVICE_URL": "http://127.0.0.1:8000",
        "INPUT_APPLICATIONS": '[{"command": ["./bin/app"]}]',
        "INPUT_UNITTEST_COMMAND": "make test",
        "INPUT_SOURCE": "archive",
    }
    assert build_spec(read_inputs(env), GithubContext.from_env({})).unittest_command == "make test"
    with pytest.raises(ValueError, match="unittest_command"):
        JobSpec(applications=[Application(command=["./a"])], unittest_command="")


# Output files (applications[].output_files), compared with Accordo's tolerance model.
# The "application" is a small Python program writing out.txt: its values come from values.txt in the
# tree it runs in, plus run-to-run noise where NOISE is set (a counter file gives each run its own).
APP = """import os, pathlib, sys
here = pathlib.Path('.')
values = [float(v) for v in (here / 'values.txt').read_text().split()]
counter = here / 'runs'
run = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(run + 1))
noise = float(os.environ.get('NOISE', '0'))
if (here / 'crash').exists():
    sys.exit('segmentation fault (simulated)')
if not (here / 'silent').exists():
    (here / 'out.txt').write_text(' '.join(repr(v + noise * ((run % 3) - 1)) for v in values))
"""


def output_judge(tmp_path: Path, values: str, **options: float) -> tuple[UnittestJudge, Path]:
    import sys

    reference, candidate = tmp_path / "reference", tmp_path / "candidate"
    for tree in (reference, candidate):
        tree.mkdir()
        (tree / "app.py").write_text(APP)
    (reference / "values.txt").write_text(values)
    (reference / "out.txt").write_text("stale")
    judge = UnittestJudge(
        KERNEL,
        [sys.executable, "app.py"],
        "true",
        reference,
        ValidationOptions(timeout_s=30, **options),  # type: ignore[arg-type]
        output_files=["out.txt"],
    )
    return judge, candidate


def test_output_files_within_the_originals_bounds_pass_and_others_fail_with_the_first_value(
    tmp_path: Path,
) -> None:
    judge, candidate = output_judge(tmp_path, "1.0 2.0 3.0 1e6", atol=1e-6, rtol=1e-5)
    said: list[str] = []
    (candidate / "values.txt").write_text("1.0 2.0 3.0000000001 1000000.001")  # within atol + rtol * |x|
    assert judge.check(candidate, said.append).passed
    assert any("running the original 3 times" in line for line in said)
    assert int((tmp_path / "reference" / "runs").read_text()) == 3  # calibrated once, not per candidate
    (candidate / "values.txt").write_text("1.0 2.5 3.0 1000000.0")
    failed = judge.check(candidate, said.append)
    assert not failed.passed and failed.failure == "mismatch" and failed.judge == "unittest"
    assert failed.reason is not None
    assert "1 of 4 values outside the original's bounds; first at value 1: 2.5 where" in failed.reason
    (candidate / "values.txt").write_text("1.0 2.0 3.0")
    shorter = judge.check(candidate, said.append)
    assert not shorter.passed and "the rewrite wrote 3 values, the original 4" in (shorter.reason or "")


def test_a_noisy_original_widens_the_bound_by_its_own_scatter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOISE", "0.01")
    judge, candidate = output_judge(tmp_path, "5.0 7.0", atol=0.0, rtol=0.0)
    (candidate / "values.txt").write_text("5.005 7.0")
    said: list[str] = []
    assert judge.check(candidate, said.append).passed  # within the runs' noise
    assert any("24 runs in all" in line for line in said)
    (candidate / "values.txt").write_text("5.5 7.0")
    assert not judge.check(candidate, said.append).passed  # far outside it


def test_an_application_that_crashes_or_writes_nothing_is_a_failure_of_the_rewrite(tmp_path: Path) -> None:
    judge, candidate = output_judge(tmp_path, "1 2 3")
    (candidate / "values.txt").write_text("1 2 3")
    (candidate / "crash").write_text("")
    crashed = judge.check(candidate, lambda _: None)
    assert not crashed.passed and crashed.failure == "crash"
    assert "segmentation fault (simulated)" in (crashed.reason or "")
    (candidate / "crash").unlink()
    (candidate / "silent").write_text("")
    (candidate / "out.txt").write_text("1 2 3")  # a stale copy must not be read as the rewrite's output
    silent = judge.check(candidate, lambda _: None)
    assert not silent.passed and "the application wrote no out.txt" in (silent.reason or "")


def test_an_original_that_writes_no_output_file_stops_the_loop(tmp_path: Path) -> None:
    judge, _ = output_judge(tmp_path, "1 2 3")
    (tmp_path / "reference" / "silent").write_text("")
    with pytest.raises(SpecError, match=r"on the original, the application wrote no out\.txt"):
        judge.prepare(lambda _: None)


def test_output_files_are_checked_in_the_spec() -> None:
    app = {"command": ["./bin/app"], "output_files": ["results/out.txt"]}
    spec = JobSpec.model_validate({"applications": [app], "unittest_command": "make test"})
    assert spec.applications[0].output_files == ["results/out.txt"]
    assert judge_for(target(), Path("."), spec).output_files == ["results/out.txt"]  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="give unittest_command as well"):
        JobSpec.model_validate({"applications": [app]})
    for bad in ("/etc/passwd", "../out.txt", ""):
        with pytest.raises(ValueError, match="must be a path inside the project"):
            JobSpec.model_validate(
                {"applications": [{"command": ["./a"], "output_files": [bad]}], "unittest_command": "t"}
            )


def test_numbers_are_read_from_text_and_npy(tmp_path: Path) -> None:
    import numpy as np

    from intelliperf.engine.output_files import read_numbers

    (tmp_path / "a.csv").write_text("x,y\n1,2.5e-3\n-3,nan\ninf,4\n")
    values = read_numbers(tmp_path / "a.csv")
    assert values[:3].tolist() == [1.0, 2.5e-3, -3.0] and np.isnan(values[3]) and values[4] == np.inf
    np.save(tmp_path / "b.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    assert read_numbers(tmp_path / "b.npy").tolist() == [0, 1, 2, 3, 4, 5]
    (tmp_path / "empty.txt").write_text("no numbers here")
    with pytest.raises(ValueError, match="holds no numbers"):
        read_numbers(tmp_path / "empty.txt")

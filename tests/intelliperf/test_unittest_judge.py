"""--unittest_command: the project's own tests judge a rewrite (correctness here; timing is a GPU test)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accordo.validate import ValidationOptions
from formulas.registry import get
from intelliperf.action._inputs import GithubContext, build_spec, read_inputs
from intelliperf.cli import _spec_from_options
from intelliperf.contract import Application, Diagnosis, JobSpec, RankedKernel
from intelliperf.engine.candidate import Target
from intelliperf.engine.job import judge_for
from intelliperf.engine.judge import AccordoJudge
from intelliperf.engine.recorded_loop import RecordedJudge
from intelliperf.engine.unittest_judge import UnittestJudge, function_regex
from intelliperf.errors import SpecError

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
    diagnosis = Diagnosis(
        kernel=KERNEL.name,
        formula="memoryAccess",
        present=True,
        severity="high",
        estimated_saving_ns=10.0,
        estimated_saving_fraction=0.5,
        summary="s",
        reasoning="r",
    )
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
    )
    assert spec.unittest_command == "./check.sh"
    env = {
        "INPUT_SERVICE_URL": "http://127.0.0.1:8000",
        "INPUT_APPLICATIONS": '[{"command": ["./bin/app"]}]',
        "INPUT_UNITTEST_COMMAND": "make test",
        "INPUT_SOURCE": "archive",
    }
    assert build_spec(read_inputs(env), GithubContext.from_env({})).unittest_command == "make test"
    with pytest.raises(ValueError, match="unittest_command"):
        JobSpec(applications=[Application(command=["./a"])], unittest_command="")

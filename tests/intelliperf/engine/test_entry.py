"""`run_spec`, the engine's one entry point, on recordings from the GPU machine (no GPU here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from intelliperf.contract import Application, JobSpec, LlmSettings
from intelliperf.engine.entry import REPLAY_DIAGNOSES_ONLY, run_spec
from intelliperf.errors import LlmError, SpecError

ROOT = Path(__file__).resolve().parents[3]
RECORDED = ROOT / "tests" / "fixtures" / "gpu"
EXAMPLES = ROOT / "examples"


def spec(formula: str = "diagnoseOnly", **fields: object) -> JobSpec:
    return JobSpec(applications=[Application(command=["./app"])], formula=formula, **fields)


def test_a_replayed_profile_is_diagnosed_and_selected() -> None:
    report = run_spec(
        spec("diagnoseOnly"), EXAMPLES / "transpose_bank", replay=RECORDED / "transpose_bank" / "original"
    )
    found = {d.formula for d in report.diagnoses if d.present}
    assert found == {"bankConflict"}, found
    assert REPLAY_DIAGNOSES_ONLY not in report.warnings  # nothing was asked that replay cannot do


def test_the_sole_applications_own_formula_is_the_one_that_runs() -> None:
    """As a spec posted to the API gives it: the application's formula and top_n win over the job's."""
    job = JobSpec.model_validate(
        {
            "formula": "memoryAccess",
            "applications": [{"command": ["./app"], "formula": "bankConflict", "top_n": 1}],
        }
    )
    report = run_spec(job, EXAMPLES / "transpose_bank", replay=RECORDED / "transpose_bank" / "original")
    assert {d.formula for d in report.diagnoses} == {"bankConflict"}
    assert report.formula_requested == "bankConflict"


def test_an_application_that_asks_for_diagnosis_only_never_optimizes() -> None:
    job = JobSpec.model_validate({"applications": [{"command": "./app", "formula": "diagnoseOnly"}]})
    assert not job.optimizes and job.formula == "diagnoseOnly"
    assert JobSpec.model_validate_json(job.model_dump_json()) == job
    two = JobSpec.model_validate(
        {"applications": [{"command": "./a", "formula": "diagnoseOnly"}, {"command": "./b"}]}
    )
    assert two.formula == "auto" and two.applications[0].formula == "diagnoseOnly"  # fanned out by clients


def test_an_optimizing_spec_on_a_replayed_profile_is_diagnosed_only_and_says_so() -> None:
    """No model is asked and no credentials are needed: the loop's verdicts need the GPU."""
    job = spec("auto", llm=LlmSettings(provider="openai", model="gpt-4o"))
    report = run_spec(job, EXAMPLES / "transpose_bank", replay=RECORDED / "transpose_bank" / "original")
    assert REPLAY_DIAGNOSES_ONLY in report.warnings and report.optimization is None


def test_optimizing_without_credentials_fails_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    job = spec("auto", build_command="make", llm=LlmSettings(provider="openai", model="gpt-4o"))
    with pytest.raises(LlmError, match="no key for the LLM provider"):
        run_spec(job, ROOT / "no-such-project")  # the project is never looked at


def test_optimizing_a_compiled_app_without_a_build_command_fails_before_any_work() -> None:
    with pytest.raises(SpecError, match="build_command"):
        run_spec(spec("auto"), ROOT / "no-such-project")


def test_a_folder_that_is_no_recording_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"replay: .*not a recorded profile"):
        run_spec(spec(), EXAMPLES / "transpose_bank", replay=tmp_path)


@pytest.mark.parametrize(
    ("files", "missing"),
    [
        ((), "it has no trace.jsonl and no counters-*.jsonl"),
        (("trace.jsonl",), "it has no counters-*.jsonl"),
        (("trace.jsonl", "raw.csv"), "it has no counters-*.jsonl"),  # half of an old Nsight Compute recording
        (("counters-1.jsonl",), "it has no trace.jsonl ("),
    ],
)
def test_the_refusal_names_what_a_recording_lacks_and_where_one_ships(
    tmp_path: Path, files: tuple[str, ...], missing: str
) -> None:
    for name in files:
        (tmp_path / name).write_text("")
    with pytest.raises(SpecError) as refused:
        run_spec(spec(), EXAMPLES / "transpose_bank", replay=tmp_path)
    assert f"is not a recorded profile: {missing}" in refused.value.message
    assert refused.value.hint is not None and "--record" not in refused.value.hint
    assert (ROOT / "tests" / "fixtures" / "gpu" / "transpose_bank" / "original" / "trace.jsonl").is_file()
    assert "tests/fixtures/gpu/transpose_bank/original" in refused.value.hint


def test_a_spec_of_two_applications_is_refused_with_the_way_to_run_each() -> None:
    job = JobSpec(applications=[Application(command=["./a"]), Application(command=["./b"])])
    with pytest.raises(SpecError, match="one application at a time; this spec has 2") as error:
        run_spec(job, EXAMPLES / "transpose_bank", replay=RECORDED / "transpose_bank" / "original")
    assert "for_application" in (error.value.hint or "")

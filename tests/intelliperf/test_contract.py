from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from intelliperf.contract import JOB_SPEC_VERSION, Application, JobSpec, RankedKernel, Report
from intelliperf.contract.report import LAUNCH_DURATIONS_KEPT
from tests.support.reports import make_kernel


def spec(**overrides: object) -> JobSpec:
    data: dict[str, object] = {"applications": [{"command": "./bin/app --size 3"}]}
    data.update(overrides)
    return JobSpec.model_validate(data)


def test_defaults_and_version() -> None:
    job = spec()
    assert job.api_version == JOB_SPEC_VERSION
    assert job.formula == "auto" and job.top_n == 10 and job.num_attempts == 10
    assert job.applications[0].command == ["./bin/app", "--size", "3"]
    assert job.llm.litellm_model == "openai/gpt-4o"
    assert job.gpu.queue == "gpu.nvidia.any"


def test_round_trip_through_json() -> None:
    job = spec(formula="bankConflict", kernel="transpose.*", gpu={"arch": "sm_90"})
    again = JobSpec.model_validate_json(job.model_dump_json())
    assert again == job
    assert again.gpu.queue == "gpu.nvidia.sm90"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"applications": []}, "applications"),
        ({"top_n": 0}, "top_n"),
        ({"kernel": "(unclosed"}, "kernel"),
        ({"formula": "bank conflict!"}, "formula"),
        ({"project_directory": "../outside"}, "project_directory"),
        ({"unknown_field": 1}, "unknown_field"),
        ({"repository": {"url": "https://user:secret@github.com/o/r.git"}}, "repository"),
        ({"api_version": "intelliperf.dev/v0"}, "api_version"),
    ],
)
def test_bad_specs_name_the_field(overrides: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        spec(**overrides)
    locations = [".".join(str(p) for p in err["loc"]) for err in info.value.errors()]
    assert any(loc.startswith(field) for loc in locations), locations


def test_application_overrides_apply() -> None:
    job = spec(
        formula="auto",
        top_n=5,
        applications=[{"command": ["./a"], "formula": "memoryAccess", "top_n": 2}, {"command": ["./b"]}],
    )
    first = job.for_application(job.applications[0])
    second = job.for_application(job.applications[1])
    assert (first.formula, first.top_n, first.applications) == ("memoryAccess", 2, [job.applications[0]])
    assert (second.formula, second.top_n) == ("auto", 5)


def test_models_are_frozen() -> None:
    with pytest.raises(ValidationError):
        Application(command=["x"]).name = "y"  # type: ignore[misc]


def test_report_schema_is_versioned_json_schema() -> None:
    schema = Report.model_json_schema()
    assert schema["properties"]["api_version"]["const"] == "intelliperf.dev/v1"
    assert {"kernels", "diagnoses", "attempts", "best", "diff", "selected"} <= set(schema["properties"])
    json.dumps(schema)


@pytest.mark.parametrize(
    ("formula", "optimizes"), [("auto", True), ("bankConflict", True), ("diagnoseOnly", False)]
)
def test_whether_a_job_optimizes_is_decided_by_its_formula(formula: str, optimizes: bool) -> None:
    spec = JobSpec(applications=[Application(command=["./app"])], formula=formula)
    assert spec.optimizes is optimizes
    only_diagnosed = Application(command=["./a"], formula="diagnoseOnly")
    assert spec.for_application(only_diagnosed).optimizes is False


def test_a_ranked_kernel_keeps_at_most_the_kept_launch_durations() -> None:
    kernel = make_kernel(1, "_Z1kv", launches=LAUNCH_DURATIONS_KEPT + 1).model_dump()
    assert RankedKernel.model_validate({**kernel, "launch_ns": [5] * LAUNCH_DURATIONS_KEPT}).launch_ns
    for refused in ([5] * (LAUNCH_DURATIONS_KEPT + 1), [-1]):
        with pytest.raises(ValidationError, match="launch_ns"):
            RankedKernel.model_validate({**kernel, "launch_ns": refused})
    assert RankedKernel.model_validate(kernel).launch_ns == []  # a report written before they were kept

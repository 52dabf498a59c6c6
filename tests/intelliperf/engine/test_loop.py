"""The optimization loop without a GPU: the real engine, real builds (nvcc), the real DSPy/LiteLLM client
against a scripted server on 127.0.0.1; Accordo's verdicts and Nsight Compute's counters are the ones
recorded on the GPU machine for the same candidates (tests/fixtures/loop, tests/fixtures/gpu)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.loop_scenarios import GARBAGE, feedback_script, fixed_source, known_fix
from intelliperf.contract import (
    Application,
    JobSpec,
    LlmSettings,
    Report,
)
from intelliperf.engine.candidate import CandidateTree, Target
from intelliperf.engine.job import run_job
from intelliperf.engine.recorded_loop import CandidateCounters, RecordedJudge
from intelliperf.engine.workspace import write_back
from intelliperf.errors import LlmError, SpecError
from intelliperf.gpu.replay import ReplayBackend
from intelliperf.llm.proposer import DspyProposer
from tests.support.scripted_llm import Failure, ScriptedLLM

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"
PROFILES = FIXTURES / "gpu" / "transpose_bank"
RECORDED = Report.model_validate_json((FIXTURES / "loop" / "report.json").read_text())
RECORDED_PROMPTS: list[str] = json.loads((FIXTURES / "loop" / "prompts.json").read_text())
KEY = "sk-loop-test-0123456789"
SOURCE, ORIGINAL, FIXED = fixed_source("transpose_bank")
WRONG = feedback_script()[2]

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="the loop rebuilds with nvcc")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    copy = tmp_path / "transpose_bank"
    shutil.copytree(ROOT / "examples" / "transpose_bank", copy, ignore=shutil.ignore_patterns("bin"))
    return copy


def run(
    project: Path,
    script: list[str | Failure],
    *,
    backend: ReplayBackend | None = None,
    judges: list[RecordedJudge] | None = None,
    judge_type: type[RecordedJudge] = RecordedJudge,
    **spec: object,
) -> tuple[Report, list[str]]:
    """One job through the engine; returns the report and the user message of every request."""
    judges = judges if judges is not None else []
    with ScriptedLLM(script, key=KEY) as server:
        settings = LlmSettings(model="scripted", api_base=server.api_base, max_retries=0)
        job = JobSpec(
            applications=[Application(command=["./bin/transpose", "20"])],
            build_command="make bin/transpose",
            formula="bankConflict",
            llm=settings,
            **spec,  # type: ignore[arg-type]
        )

        def judge_for(target: Target, reference_dir: Path, _: JobSpec) -> RecordedJudge:
            assert target.kernel.name == "_Z15transpose_tiledPKfPfii"
            judges.append(judge_type(RECORDED, reference_dir))
            return judges[-1]

        report = run_job(
            job,
            backend=backend or CandidateCounters(PROFILES / "original", PROFILES / "fixed"),
            project=project,
            proposer=DspyProposer(settings),
            judge_factory=judge_for,
        )
        prompts = [request["messages"][-1]["content"] for request in server.requests]
    return report, prompts


@pytest.fixture(autouse=True)
def llm_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLM_GATEWAY_KEY", KEY)


def test_every_failure_goes_back_to_the_model_until_the_fix(project: Path) -> None:
    judges: list[RecordedJudge] = []
    report, prompts = run(project, feedback_script(), judges=judges, num_attempts=6, in_place=True)

    assert [a.status for a in report.attempts] == ["unparseable", "build_failed", "invalid", "success"]
    assert len(prompts) == 4 and judges[0].prepared == 1 and len(judges[0].checked) == 2
    # What the model is told: the GPU, the kernel with its hot line, and each earlier outcome in words.
    assert "NVIDIA H200 (sm_90), warp size 32, 32 shared-memory banks" in prompts[0]  # the recording's GPU
    assert "   59 |             float v = tile[threadIdx.x][threadIdx.y + j]" in prompts[0]
    assert "<-- HOT: 100% of the bottleneck" in prompts[0]
    assert "No earlier attempts." in prompts[0]
    assert "Attempt 1: unparseable" in prompts[1] and "it began: 'Sure! The tile" in prompts[1]
    assert 'error: identifier "kTlie" is undefined' in prompts[2]
    assert (
        "Attempt 2: build failed" in prompts[2]
        and "+    __shared__ float tile[kTile][kTlie + 1];" in prompts[2]
    )
    mismatch = report.attempts[2].validation
    assert mismatch is not None and mismatch.failure == "mismatch"
    assert "Attempt 3: invalid" in prompts[3] and mismatch.reason and mismatch.reason in prompts[3]
    assert "16244696 of 16777216 float32 elements differ" in prompts[3]
    # The same feedback reached the model on the GPU machine.
    assert mismatch.reason in RECORDED_PROMPTS[3]

    best = report.best
    assert report.optimization is not None and report.optimization.status == "success"
    assert best is not None and best.attempt == 4 and best.files == [SOURCE] and best.written_back
    assert best.speedup == RECORDED.attempts[3].speedup and best.speedup.verdict == "faster"
    assert best.metric_before == 16252928.0 and best.metric_after == 0.0
    assert best.metric_name == "excessive shared-memory wavefronts"
    assert (
        report.diff == report.attempts[3].diff
        and "+    __shared__ float tile[kTile][kTile + 1];" in report.diff
    )
    assert (project / SOURCE).read_text() == FIXED
    assert all(a.tokens_in and a.tokens_out for a in report.attempts)
    assert {"llm", "build", "validate", "measure", "counters"} <= set(report.attempts[3].seconds)
    assert report.passes.optimize_s and report.passes.optimize_s > 0


def test_replies_that_never_hold_an_edit_exhaust_the_attempts_and_touch_nothing(project: Path) -> None:
    judges: list[RecordedJudge] = []
    report, prompts = run(project, [GARBAGE, GARBAGE, GARBAGE], judges=judges, num_attempts=3, in_place=True)
    assert [a.status for a in report.attempts] == ["unparseable"] * 3
    assert report.optimization is not None and report.optimization.status == "exhausted"
    assert report.best is None and report.diff is None and judges[0].checked == []
    assert "Attempt 2: unparseable" in prompts[2]
    assert (project / SOURCE).read_text() == ORIGINAL


def test_a_provider_failure_stops_the_loop_and_keeps_what_was_learned(project: Path) -> None:
    report, _ = run(project, [GARBAGE, Failure(401, "Incorrect API key provided")], num_attempts=5)
    optimization = report.optimization
    assert optimization is not None and optimization.status == "aborted"
    assert optimization.exit_code == LlmError.exit_code
    assert "LMAuthError" in optimization.note and "Incorrect API key" in optimization.note
    assert KEY not in optimization.note
    assert [a.status for a in report.attempts] == ["unparseable"]
    assert report.diagnoses and report.selected is not None


def test_best_of_n_asks_twice_with_one_prompt_and_keeps_the_correct_one(project: Path) -> None:
    report, prompts = run(
        project, [WRONG, known_fix("transpose_bank")], num_attempts=4, candidates_per_round=2
    )
    assert [(a.round, a.status) for a in report.attempts] == [(1, "invalid"), (1, "success")]
    assert len(prompts) == 2 and prompts[0] == prompts[1]
    assert report.best is not None and report.best.attempt == 2 and not report.best.written_back
    assert (project / SOURCE).read_text() == ORIGINAL  # without --in_place the project is left alone


def test_faster_but_bottleneck_still_there_is_not_a_success(project: Path) -> None:
    unchanged = CandidateCounters(PROFILES / "original", PROFILES / "original")
    report, _ = run(project, [known_fix("transpose_bank")], backend=unchanged, num_attempts=1)
    [attempt] = report.attempts
    assert attempt.status == "no_metric_gain"
    assert attempt.metric_after == attempt.metric_before == 16252928.0
    assert attempt.reason and "the bottleneck is still there" in attempt.reason
    assert report.optimization is not None and report.optimization.status == "exhausted"


def test_a_file_the_user_edits_during_the_job_is_not_overwritten(project: Path) -> None:
    class UserEditsMeanwhile(RecordedJudge):
        def prepare(self, say: object) -> None:
            super().prepare(say)
            (project / SOURCE).write_text(ORIGINAL + "// the user's own change\n")

    report, _ = run(
        project, [known_fix("transpose_bank")], judge_type=UserEditsMeanwhile, num_attempts=1, in_place=True
    )
    assert report.best is not None and not report.best.written_back
    assert any("changed in the project while the job ran" in w for w in report.warnings)
    assert (project / SOURCE).read_text().endswith("// the user's own change\n")


def test_candidate_tree_restores_edited_and_removes_created_files(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("int a = 1;\n")
    tree = CandidateTree(tmp_path)
    changes = tree.apply("k.cu\n<<<<<<< SEARCH\nint a = 1;\n=======\nint a = 2;\n>>>>>>> REPLACE\n\n"
                         "new.cuh\n<<<<<<< FILE\n#pragma once\n>>>>>>> FILE")  # fmt: skip
    assert sorted(changes) == ["k.cu", "new.cuh"] and (tmp_path / "new.cuh").is_file()
    tree.restore()
    assert (tmp_path / "k.cu").read_text() == "int a = 1;\n" and not (tmp_path / "new.cuh").exists()


def test_write_back_refuses_a_file_the_user_changed_meanwhile(tmp_path: Path) -> None:
    project, started = tmp_path / "project", tmp_path / "copy"
    for folder in (project, started):
        folder.mkdir()
        (folder / "k.cu").write_text("original\n")
    (project / "k.cu").write_text("edited by the user during the job\n")
    with pytest.raises(SpecError, match="changed in the project while the job ran"):
        write_back(project, {"k.cu": "rewrite\n"}, unchanged_since=started)
    assert (project / "k.cu").read_text() == "edited by the user during the job\n"
    with pytest.raises(SpecError, match="outside the project"):
        write_back(project, {"../evil.cu": "x"}, unchanged_since=started)


def test_a_kernel_without_project_sources_cannot_be_rewritten(tmp_path: Path) -> None:
    """Profiles whose hot lines are in files the project does not hold: the loop says so and the
    diagnosis is kept."""
    empty = tmp_path / "elsewhere"
    empty.mkdir()
    (empty / "Makefile").write_text("bin/transpose:\n\ttrue\n")
    report, prompts = run(empty, [], num_attempts=1)
    assert prompts == []
    assert report.optimization is not None and report.optimization.status == "aborted"
    assert "not in the project's files" in report.optimization.note and report.diagnoses

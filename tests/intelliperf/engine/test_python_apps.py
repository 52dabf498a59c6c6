"""Python applications (Triton, PyTorch) in the engine: no build step, a Triton kernel cache per copy of
the project that a new candidate starts without, and Accordo's captures without PyTorch's caching
allocator. Real processes; the GPU side is tests/test_gpu_loop_torch.py."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from accordo.capture import run_capture
from benchmarks.loop_scenarios import fixed_source, known_fix
from intelliperf.contract import Application, JobSpec, LlmSettings
from intelliperf.engine.candidate import CandidateTree
from intelliperf.engine.job import check_optimizable, run_job
from intelliperf.engine.recorded_loop import CandidateCounters, RecordedJudge
from intelliperf.engine.workspace import copy_workspace, workspace
from intelliperf.errors import ProfileError, SpecError
from intelliperf.llm.proposer import DspyProposer
from intelliperf.process import JIT_CACHE, is_python_command
from profiler.trace import run_app
from tests.support.scripted_llm import ScriptedLLM

ROOT = Path(__file__).resolve().parents[3]
PRINT_ENV = "import os, sys; print(os.environ.get(sys.argv[1], '<unset>'))"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["python3", "app.py"], True),
        (["/usr/bin/python3.12", "-m", "model"], True),
        (["./model.py", "20"], True),
        (["./bin/transpose", "20"], False),
        (["make", "run"], False),
    ],
)
def test_python_applications_compile_as_they_run(command: list[str], expected: bool) -> None:
    assert is_python_command(command) is expected


def test_the_loop_needs_a_build_command_only_for_compiled_applications() -> None:
    check_optimizable(JobSpec(applications=[Application(command=["./triton_bins.py", "20"])]))
    with pytest.raises(SpecError, match="give -b/--build_command") as raised:
        check_optimizable(JobSpec(applications=[Application(command=["./bin/transpose"])]))
    assert raised.value.hint and "Python applications need no build command" in raised.value.hint
    check_optimizable(
        JobSpec(applications=[Application(command=["./bin/transpose"])], formula="diagnoseOnly")
    )


def test_each_copy_of_the_project_keeps_its_own_triton_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "shared"))  # the user's own cache is not used
    reference, candidate = tmp_path / "reference", tmp_path / "candidate"
    for folder in (reference, candidate):
        folder.mkdir()
        run = run_app([sys.executable, "-c", PRINT_ENV, "TRITON_CACHE_DIR"], cwd=folder, env=os.environ,
                      timeout_s=30)  # fmt: skip
        assert run.returncode == 0 and run.stdout.strip() == str(folder.resolve() / JIT_CACHE)


def test_a_new_candidate_starts_without_the_previous_ones_kernels(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("BLOCK = 1\n")
    cached = tmp_path / JIT_CACHE / "abc" / "kernel.cubin"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"compiled for the previous candidate")
    tree = CandidateTree(tmp_path)
    tree.apply("app.py\n<<<<<<< SEARCH\nBLOCK = 1\n=======\nBLOCK = 2\n>>>>>>> REPLACE\n")
    assert not (tmp_path / JIT_CACHE).exists()
    assert (tmp_path / "app.py").read_text() == "BLOCK = 2\n"


def test_copies_of_the_project_leave_the_kernel_cache_behind(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / JIT_CACHE).mkdir(parents=True)
    (project / JIT_CACHE / "k.cubin").write_bytes(b"x")
    (project / "app.py").write_text("print(1)\n")
    with workspace(project, root=tmp_path) as ws:
        assert (ws / "app.py").is_file() and not (ws / JIT_CACHE).exists()
        (ws / JIT_CACHE).mkdir()
        again = copy_workspace(ws, tmp_path / "candidate" / ws.name)
        assert (again / "app.py").is_file() and not (again / JIT_CACHE).exists()


def test_captures_run_without_pytorchs_caching_allocator(tmp_path: Path) -> None:
    """No CUDA here, so the program writes no capture (a ProfileError); what it saw in its environment is
    what a PyTorch program under capture sees."""
    seen = tmp_path / "seen.txt"
    program = (
        f"import os; open({str(seen)!r}, 'w').write(os.environ.get('PYTORCH_NO_CUDA_MEMORY_CACHING', ''))"
    )
    with pytest.raises(ProfileError):
        run_capture([sys.executable, "-c", program], kernel_regex="k", cwd=tmp_path, timeout_s=30,
                    library=tmp_path / "libintelliperf_profiler.so")  # fmt: skip
    assert seen.read_text() == "1"


def test_the_loop_rewrites_a_triton_kernel_without_a_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine end to end on a Python application: no build step, Proton's regions and the Triton note
    in what the model is asked, the known fix judged with Accordo's verdict and timing from the GPU run
    (tests/fixtures/gpu/triton_strided/loop-report.json)."""
    recording = ROOT / "tests" / "fixtures" / "gpu" / "triton_strided"
    project = Path(shutil.copytree(ROOT / "examples" / "triton_strided", tmp_path / "triton_strided"))
    source, original, fixed = fixed_source("triton_strided")
    monkeypatch.setenv("LLM_GATEWAY_KEY", "sk-python-app-test")
    with ScriptedLLM([known_fix("triton_strided")], key="sk-python-app-test") as server:
        settings = LlmSettings(model="scripted", api_base=server.api_base, max_retries=0)
        spec = JobSpec(applications=[Application(command=["./scale_strided.py", "3"])], llm=settings,
                       formula="auto", num_attempts=1, in_place=True)  # fmt: skip
        report = run_job(
            spec,
            backend=CandidateCounters(recording / "original", recording / "fixed"),
            project=project,
            proposer=DspyProposer(settings),
            judge_factory=RecordedJudge.factory(recording),
        )
        messages = "\n".join(m["content"] for m in server.requests[0]["messages"])
    assert report.passes.build_s is None and report.intra_kernel is not None
    assert "Triton kernel (a @triton.jit function)" in messages and "Cycles inside the kernel" in messages
    (attempt,) = report.attempts
    assert attempt.status == "success" and "build" not in attempt.seconds, attempt.reason
    assert report.best is not None and report.best.speedup.low > 5 and report.best.written_back
    assert (project / source).read_text() == fixed != original

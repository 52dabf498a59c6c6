"""The optimization loop end to end on the GPU on a PyTorch model: `intelliperf run` with no build command,
its model a scripted server on 127.0.0.1 that answers the known fix of the model's Triton kernel, judged
by Accordo on cuLaunchKernelEx launches. (A part of the GPU record of its own: tests/test_gpu_loop.py
takes as long.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.loop_scenarios import fixed_source, known_fix
from intelliperf.contract import Report
from tests.support.loop_run import KEY, ROOT, run_scripted
from tests.support.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.gpu


def test_a_pytorch_model_gets_its_triton_kernel_rewritten_without_a_build(tmp_path: Path) -> None:
    """torch_model: library kernels take most of the time; the loop rewrites the Triton kernel (and its
    launch grid), judged by Accordo on cuLaunchKernelEx launches, with no build command."""
    pytest.importorskip("triton")
    project = tmp_path / "torch_model"
    shutil.copytree(ROOT / "examples" / "torch_model", project)
    source, _, fixed = fixed_source("torch_model")
    with ScriptedLLM([known_fix("torch_model")], key=KEY) as server:
        done = run_scripted(
            server,
            "-f", "auto", "-p", str(project), "--num_attempts", "1", "-o", str(tmp_path / "report.json"),
            "--", "./model.py", "3",
        )  # fmt: skip
        prompt = "\n".join(message["content"] for message in server.requests[0]["messages"])
    assert done.returncode == 0, done.stderr
    report = Report.model_validate(json.loads((tmp_path / "report.json").read_text()))
    assert report.selected is not None and report.selected.formula == "memoryAccess"
    assert report.kernels[0].library and not report.kernels[1].library  # cuBLAS is hotter; not a target
    assert report.passes.build_s is None
    assert "Triton kernel" in prompt and "Cycles inside the kernel" in prompt
    attempt = report.attempts[0]
    assert attempt.status == "success", attempt.reason
    assert "build" not in attempt.seconds
    assert report.best is not None and report.best.speedup.low > 1.5
    assert report.best.files == [source] and (project / source).read_text() != fixed  # not in place

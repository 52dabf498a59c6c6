from __future__ import annotations

import dspy
import pytest

from intelliperf.contract import LlmSettings
from intelliperf.contract.report import Attempt, DeviceInfo, SourceLocation, Speedup, ValidationResult
from intelliperf.llm.client import make_lm
from intelliperf.llm.prompts import (
    condense_compiler_output,
    render_attempts,
    render_device,
    render_source,
    signature_for,
)
from tests.support.reports import make_diagnosis
from tests.support.scripted_llm import ScriptedLLM, dspy_reply

NVCC_OUTPUT = """transpose.cu(42): error: identifier "tile2" is undefined
      tile2[threadIdx.y][threadIdx.x] = in[i];
      ^

transpose.cu(50): warning #177-D: variable "k" was declared but never referenced

1 error detected in the compilation of "transpose.cu".
"""

DIAGNOSIS = make_diagnosis(
    "transpose_tiled",
    saving_ns=5000.0,
    summary="97% of shared wavefronts are excess",
    reasoning="excess share 0.97 >= 0.20",
    metrics={"excess_share": 0.97},
    locations=[SourceLocation(file="transpose.cu", line=3, share=0.9)],
)


def test_device_facts() -> None:
    text = render_device(DeviceInfo(name="NVIDIA H200", arch="sm_90", sm_count=132, l2_bytes=60 * 2**20))
    assert (
        text
        == "NVIDIA H200 (sm_90), warp size 32, 32 shared-memory banks of 4 bytes, 132 SMs, L2 cache 60 MiB"
    )


def test_source_marks_hot_lines() -> None:
    text = render_source("transpose.cu", "a\nb\nc = tile[x][y];\n", DIAGNOSIS)
    lines = text.splitlines()
    assert lines[0] == "// file: transpose.cu"
    assert lines[3] == "    3 | c = tile[x][y];    // <-- HOT: 90% of the bottleneck"
    assert "HOT" not in lines[1] + lines[2]


def test_compiler_output_is_condensed_to_errors() -> None:
    text = condense_compiler_output(NVCC_OUTPUT)
    assert text.splitlines()[0] == 'transpose.cu(42): error: identifier "tile2" is undefined'
    assert "tile2[threadIdx.y]" in text
    assert "warning" not in text


def test_attempts_are_rendered_as_text() -> None:
    validation = ValidationResult(
        kernel="k",
        passed=True,
        speedup=Speedup(
            median=0.91,
            low=0.9,
            high=0.92,
            significant=True,
            verdict="slower",
            reference_ns=1,
            candidate_ns=1,
            runs=5,
        ),
    )
    attempts = [
        Attempt(index=1, status="build_failed", reason=condense_compiler_output(NVCC_OUTPUT)),
        Attempt(
            index=2,
            status="invalid",
            reason="launch 1 of 5 (k), parameter 1 (float*): 3 of 10 elements differ",
        ),
        Attempt(index=3, status="not_faster", validation=validation, diff="--- a/k.cu\n+++ b/k.cu\n"),
    ]
    text = render_attempts(attempts)
    assert "Attempt 1: build failed\ntranspose.cu(42): error" in text
    assert "Attempt 2: invalid\nlaunch 1 of 5 (k), parameter 1 (float*)" in text
    assert "measured speedup 0.910x (95% interval 0.900 to 0.920): slower" in text
    assert "The edit was:\n--- a/k.cu" in text
    assert "Attempt(" not in text and "ValidationResult" not in text
    assert render_attempts([]) == "No earlier attempts."


def test_signature_carries_the_formula_guidance(monkeypatch: pytest.MonkeyPatch) -> None:
    sig = signature_for("bankConflict", "Pad 2-D tiles by one element per row.")
    assert "Pad 2-D tiles" in sig.instructions and "<<<<<<< SEARCH" in sig.instructions
    assert list(sig.input_fields) == ["gpu", "bottleneck", "source", "attempts"]
    monkeypatch.setenv("LLM_GATEWAY_KEY", "sk-t")
    with ScriptedLLM(
        [dspy_reply(edit="k.cu\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE")], key="sk-t"
    ) as server:
        lm = make_lm(LlmSettings(model="scripted", api_base=server.api_base, max_retries=0))
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter(use_json_adapter_fallback=False)):
            out = dspy.Predict(sig)(gpu="H200", bottleneck="b", source="s", attempts="No earlier attempts.")
        assert out.edit.startswith("k.cu\n<<<<<<< SEARCH")
        system = server.requests[0]["messages"][0]["content"]
        assert "Pad 2-D tiles" in system

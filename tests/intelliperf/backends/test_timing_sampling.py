"""The NVIDIA timing pass samples launches past TRACE_SAMPLE_FIRST (profiler/native/launch_sampler.h) and
says so; a recording keeps every launch. The traced run stands in for the GPU run this machine cannot make:
its table is what the native tracer writes (tests/profiler/test_trace_format.py's writer)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from intelliperf.gpu.nvidia import backend as nvidia
from intelliperf.gpu.nvidia.backend import TRACE_SAMPLE_EVERY, TRACE_SAMPLE_FIRST, NvidiaBackend
from profiler.trace import TracedRun, read_native_trace, summarize_tables
from tests.profiler.test_trace_format import native_trace


def traced(tmp_path: Path, unrecorded: list[int]) -> TracedRun:
    table = read_native_trace(
        native_trace(
            tmp_path / "t.jsonl", ["hot", "cold"], [(0, 1, 0, 100), (1, 2, 200, 250)], unrecorded=unrecorded
        )
    )
    return TracedRun((table,), tuple(summarize_tables([table])), 0, "", "", 1.0)


@pytest.mark.parametrize("recording", [False, True])
def test_the_timing_pass_samples_unless_it_records_and_says_which_kernels_it_sampled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recording: bool
) -> None:
    asked: list[Mapping[str, str] | None] = []

    def run(
        argv: list[str], *, cwd: Path, timeout_s: float, settings: Mapping[str, str] | None = None
    ) -> TracedRun:
        asked.append(settings)
        return traced(tmp_path, [0, 0] if recording else [5000, 0])

    monkeypatch.setattr(nvidia, "run_traced", run)
    backend = NvidiaBackend(record=tmp_path / "record" if recording else None)
    timing = backend.time_kernels(["./app"], cwd=tmp_path, timeout_s=10)
    if recording:
        assert asked == [None] and backend.take_notes() == []
        return
    assert asked == [{"sample_first": str(TRACE_SAMPLE_FIRST), "sample_every": str(TRACE_SAMPLE_EVERY)}]
    hot = next(k for k in timing.kernels if k.name == "hot")
    assert (hot.launches, hot.total_ns) == (5001, 5001 * 100)
    (note,) = backend.take_notes()
    assert note.startswith(f"1 kernel(s) launched more than {TRACE_SAMPLE_FIRST} times")
    assert f"every {TRACE_SAMPLE_EVERY}th launch was timed" in note

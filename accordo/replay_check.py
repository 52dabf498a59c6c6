"""The judge's uses of replay (accordo.replay), each in a process of its own, and the launch pattern.

* ``replay_capture``: a capture's launches replayed once; the replayed capture, or why there is none.
* ``replay_speedups``: the candidate's kernel against the reference's on one captured launch, L2 flushed
  before each launch (``cold``) and not (``warm``): the isolated speedup, beside the in-application one.
* ``speedups_disagree``: the in-application speedup differs by more than ``AGREEMENT`` times from both
  replayed ones (L2 flushed and warm): the program does something around its kernel when timed that its
  kernel alone does not explain (a program that behaves differently under a profiler, work moved to other
  kernels). Both, because a program's launches may find their inputs in L2 or not: on an H100 a 10-launch
  loop agreed with the warm replay (8.3x in the application, 5.4x warm, 3.6x flushed) and a single-launch
  program with the flushed one (78.6x in the application, 82.4x flushed, 29.0x warm).
* ``launch_pattern_problem``: the candidate launches the kernel on other streams, inside CUDA graphs, or
  with another persisting-L2 limit than the reference.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from intelliperf.contract.report import Speedup
from intelliperf.errors import tail

from .capture import Capture, read_capture
from .speedup import KernelTimes, speedup_from_times

__all__ = [
    "AGREEMENT",
    "REPLAY_SECONDS",
    "ReplayFailure",
    "ReplaySpeedups",
    "launch_pattern_problem",
    "replay_capture",
    "replay_speedups",
    "speedups_disagree",
]

REPLAY_SECONDS = 2.0  # timing loop of replay_speedups (at least 10 iterations of each side)
AGREEMENT = 2.0  # in-application and warm replay speedups within this factor of each other
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ReplayFailure:
    """No replay: ``problem``, the capture cannot be replayed (accordo.replay.replay_problem); ``error``,
    the replay itself failed (a driver call, a kernel that faulted, a timeout)."""

    kind: Literal["problem", "error"]
    message: str


@dataclass(frozen=True)
class ReplaySpeedups:
    cold: Speedup  # L2 flushed before every launch
    warm: Speedup
    launch: int  # 0-based launch of the kernel that was timed
    iterations: int


def _replay(args: list[str], timeout_s: float) -> dict[str, object]:
    """Run ``python -m accordo.replay <args>``; its JSON answer, or {"error": why} if it died."""
    env = dict(os.environ)
    root = str(_PACKAGE_ROOT)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "accordo.replay", *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"the replay did not finish within {timeout_s:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        return {"error": f"the replay process exited with {proc.returncode}: {tail(proc.stderr, 5).strip()}"}
    return answer


def _failure(answer: dict[str, object]) -> ReplayFailure:
    if "problem" in answer:
        return ReplayFailure("problem", str(answer["problem"]))
    return ReplayFailure("error", str(answer.get("error", "the replay gave no answer")))


def replay_capture(capture_path: Path, out_path: Path, *, timeout_s: float) -> Capture | ReplayFailure:
    """``capture_path``'s launches replayed; the replayed capture, or why there is none."""
    answer = _replay(["outputs", str(capture_path), str(out_path)], timeout_s)
    if "launches" not in answer:
        return _failure(answer)
    return read_capture(out_path)


def replay_speedups(
    reference_path: Path, candidate_path: Path, *, timeout_s: float, seconds: float = REPLAY_SECONDS
) -> ReplaySpeedups | ReplayFailure:
    """Replay timing of one launch of both captures; the speedups, or why there are none."""
    answer = _replay(["time", str(reference_path), str(candidate_path), "--seconds", str(seconds)], timeout_s)
    if "iterations" not in answer:
        return _failure(answer)

    def side(key: str) -> KernelTimes:
        values = tuple(float(v) for v in answer[key])  # type: ignore[attr-defined]
        return KernelTimes(kernel_ns=values, wall_s=(), launches=tuple(1 for _ in values))

    method = "replay of one captured launch, {0}; reference and candidate alternating; CUDA events"
    speedups = {}
    for flavour, words in (("cold", "L2 flushed before each launch"), ("warm", "L2 not flushed")):
        speedup = speedup_from_times(side(f"reference_{flavour}_ns"), side(f"candidate_{flavour}_ns"))
        speedups[flavour] = speedup.model_copy(update={"method": method.format(words)})
    return ReplaySpeedups(
        cold=speedups["cold"],
        warm=speedups["warm"],
        launch=int(answer["launch"]),  # type: ignore[call-overload]
        iterations=int(answer["iterations"]),  # type: ignore[call-overload]
    )


def speedups_disagree(
    in_application: float, replay_cold: float, replay_warm: float, agreement: float = AGREEMENT
) -> bool:
    """True when ``in_application`` differs by more than ``agreement`` times (either way) from both
    replayed speedups."""
    if min(in_application, replay_cold, replay_warm) <= 0:
        raise ValueError("speedups must be positive")
    return all(
        max(in_application / replayed, replayed / in_application) > agreement
        for replayed in (replay_cold, replay_warm)
    )


def launch_pattern_problem(reference: Capture, candidate: Capture) -> str | None:
    """How the candidate launches its kernel differently from the reference, or None.

    Compared: how many distinct streams the launches use, how many were made inside a CUDA graph
    capture, and the persisting-L2 limits set at the launches (a carve-out left set keeps chosen data
    in L2 across launches, which speeds up a benchmark loop and nothing else). Launches without SHAPE
    records (an older capture) are not compared."""

    def pattern(capture: Capture) -> tuple[int, int, frozenset[int]] | None:
        shapes = [x.shape for x in capture.launches if x.shape is not None]
        if not shapes or len(shapes) != len(capture.launches):
            return None
        streams = {(s.stream, s.per_thread) for s in shapes}
        graphs = sum(1 for s in shapes if s.graph_capture)
        limits = frozenset(s.persisting_l2 for s in shapes if s.persisting_l2 is not None)
        return len(streams), graphs, limits

    ref, cand = pattern(reference), pattern(candidate)
    if ref is None or cand is None:
        return None
    if cand[0] != ref[0]:
        return f"the reference launches the kernel on {ref[0]} stream(s), the candidate on {cand[0]}"
    if cand[1] != ref[1]:
        return (
            f"{ref[1]} of the reference's launches were made inside a CUDA graph capture, "
            f"{cand[1]} of the candidate's"
        )
    if cand[2] != ref[2]:
        return (
            f"the candidate launches with a persisting-L2 limit of {_limits(cand[2])}, the reference with "
            f"{_limits(ref[2])}: a carve-out left set keeps chosen data in L2 between launches"
        )
    return None


def _limits(values: frozenset[int]) -> str:
    return ", ".join(f"{v} bytes" for v in sorted(values)) or "none known"

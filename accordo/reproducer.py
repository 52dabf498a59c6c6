"""A reproducer: one captured launch with the reference's and the candidate's kernels, checked and timed
with no application (``intelliperf replay DIR``).

The folder holds ``reference.bin`` (the reference's launch: its parameters, the bytes of every buffer
before and after the kernel, its launch shape and cubin), ``candidate.bin`` (the candidate's kernel on the
same inputs, as captured while judging it), and ``reproducer.json`` (the kernel, the launch, the comparison
settings the judge used). ``check_reproducer`` replays the candidate's kernel on the reference's inputs,
compares what it wrote with the reference's outputs under those settings, and times both kernels on the
launch (L2 flushed and not). It compares against one reference run, where the judge had several: the
rounding term of the bound stays, the reference's run-to-run noise is not known here.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from intelliperf.contract.report import Speedup
from intelliperf.errors import ProfileError

from .capture import read_capture
from .capture_writer import write_capture
from .compare import compare_captures
from .replay import timed_launch
from .replay_check import REPLAY_SECONDS, ReplayFailure, replay_capture, replay_speedups

__all__ = ["REPRODUCER_FILES", "ReproducerResult", "check_reproducer", "save_reproducer"]

REPRODUCER_FILES = ("reference.bin", "candidate.bin", "reproducer.json")
_COMMAND = "intelliperf replay ."


@dataclass(frozen=True)
class ReproducerResult:
    kernel: str
    launch: int
    passed: bool
    reason: str | None
    cold: Speedup | None
    warm: Speedup | None
    timing_problem: str | None = None


def save_reproducer(
    folder: Path,
    reference: Path,
    candidate: Path,
    *,
    kernel: str,
    launch: int,
    settings: dict[str, object],
    outputs: frozenset[int],
) -> Path:
    """Launch ``launch`` of the two captures (and the cubins they ran) into ``folder``; ``outputs``: the
    parameters the reference's kernel writes (at any launch of the program)."""
    folder.mkdir(parents=True, exist_ok=True)
    for source, name in ((reference, "reference.bin"), (candidate, "candidate.bin")):
        capture = read_capture(source)
        write_capture(capture, folder / name, [timed_launch(capture, launch)])
    manifest = {
        "kernel": kernel,
        "launch": launch,
        "outputs": sorted(outputs),
        "compare": settings,
        "command": _COMMAND,
    }
    (folder / "reproducer.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return folder


def check_reproducer(
    folder: Path, *, timeout_s: float = 300.0, seconds: float = REPLAY_SECONDS
) -> ReproducerResult:
    """Replay and judge the candidate's kernel, then time both (see the module docstring)."""
    missing = [name for name in REPRODUCER_FILES if not (folder / name).is_file()]
    if missing:
        raise ProfileError(f"{folder} is not a reproducer: it lacks {', '.join(missing)}")
    try:
        manifest = json.loads((folder / "reproducer.json").read_text())
        kernel, launch, settings = str(manifest["kernel"]), int(manifest["launch"]), dict(manifest["compare"])
        outputs = frozenset(int(i) for i in manifest["outputs"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ProfileError(f"{folder / 'reproducer.json'} is not a reproducer manifest: {exc}") from exc
    reference = read_capture(folder / "reference.bin")
    with tempfile.TemporaryDirectory(prefix="accordo-reproducer-") as scratch:
        replayed = replay_capture(
            folder / "candidate.bin", Path(scratch) / "replayed.bin", timeout_s=timeout_s
        )
        if isinstance(replayed, ReplayFailure):
            return ReproducerResult(kernel, launch, False, replayed.message, None, None)
        compared = compare_captures([reference], replayed, outputs=outputs, **settings)  # type: ignore[arg-type]
    if not compared.passed:
        return ReproducerResult(kernel, launch, False, compared.reason, None, None)
    timed = replay_speedups(
        folder / "reference.bin", folder / "candidate.bin", timeout_s=timeout_s, seconds=seconds
    )
    if isinstance(timed, ReplayFailure):
        return ReproducerResult(kernel, launch, True, None, None, None, timing_problem=timed.message)
    return ReproducerResult(kernel, launch, True, None, timed.cold, timed.warm)

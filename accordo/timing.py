"""Kernel time through the native profiler's time mode: each launch of the target kernel is timed by a pair
of CUDA events recorded on its stream just before and just after it, with no CUPTI activity enabled.

Why a second instrument beside the tracer: on an H100, CUPTI's activity records made some memory-bound
kernels 3-5 us slower per launch (``benchmarks/speedup_probe.py``: reduction_bank's fixed kernel ran
81.9 us under CUPTI and 78.4 us per launch back to back without it), which moved their measured speedups
by 3-7%. Events add a fixed cost of their own (about 2.5 us per launch, the same for the reference and
the candidate), as a standalone CUDA-event harness does.

Time file (one per CUDA process; written to ``<path>.tmp`` and renamed when complete)::

    {"accordo":"time","version":1,"pid":1234}
    {"name":"_Z5scalePKfPfi","demangled":"scale(float const*, float*, int)","index":0,
     "grid":[256,1,1],"block":[256,1,1],"shared":0,"args":["00a0...","0010...","00000100"],"ns":81234}
    {"name":"_Z5scalePKfPfi","demangled":"scale(float const*, float*, int)","index":1,"error":"..."}
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from accordo.capture import judged_env
from intelliperf.errors import ProfileError
from profiler.trace import NO_EXIT_HANDLERS, jsonl_records, profiler_messages, run_jsonl_mode

__all__ = ["LaunchRequest", "TimedLaunch", "TimedRun", "read_timing", "run_timed"]

TIME_VERSION = 1


@dataclass(frozen=True)
class LaunchRequest:
    """What one launch asked the GPU to do: its configuration and each parameter's bytes as passed."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int  # dynamic shared memory, bytes
    args: tuple[bytes | None, ...] | None  # None: the layout was unknown; an item None: not passed


@dataclass(frozen=True)
class TimedLaunch:
    name: str
    demangled: str
    index: int  # 0, 1, 2, ... per kernel (mangled) name and process, in launch order
    duration_ns: float
    process: int  # the pid in the file's header
    request: LaunchRequest | None = None  # None: a time file from before launches carried it


@dataclass(frozen=True)
class TimedRun:
    launches: tuple[TimedLaunch, ...]
    wall_s: float
    stdout: str
    stderr: str


def read_timing(path: str | os.PathLike[str]) -> list[TimedLaunch]:
    """The timed launches in a time file: the kernels in the order they were first seen, each
    kernel's launches in launch order (a multi-threaded program may finish them in another order).

    Raises ProfileError when the file is not a complete time file of this version, a line is malformed,
    or a launch could not be timed (its line carries the reason: a CUDA graph capture, a failed launch).
    """
    header, records = jsonl_records(path, "time", TIME_VERSION)
    process = header.get("pid")
    if not isinstance(process, int) or isinstance(process, bool):
        raise ProfileError(f"{path}: the header has no integer 'pid'")
    launches = []
    for where, record in records:
        if not isinstance(record, dict):
            raise ProfileError(f"{where}: expected a JSON object")
        if "error" in record and "name" not in record:
            raise ProfileError(f"the profiler could not time the run: {record['error']}")
        name, demangled, index = record.get("name"), record.get("demangled"), record.get("index")
        if not isinstance(name, str) or not isinstance(demangled, str):
            raise ProfileError(f"{where}: field 'name' or 'demangled' is missing or not a string")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ProfileError(f"{where}: field 'index' is missing or not a non-negative integer")
        if "error" in record:
            raise ProfileError(f"launch {index} of {demangled} could not be timed: {record['error']}")
        ns = record.get("ns")
        if not isinstance(ns, int | float) or isinstance(ns, bool) or not math.isfinite(ns) or ns <= 0:
            raise ProfileError(f"{where}: field 'ns' is missing or not a positive number")
        launches.append(TimedLaunch(name, demangled, index, float(ns), process, _request(record, where)))
    first_seen = {name: rank for rank, name in enumerate(dict.fromkeys(x.name for x in launches))}
    return sorted(launches, key=lambda x: (first_seen[x.name], x.index))


def _dims(record: dict[str, object], key: str, where: str) -> tuple[int, int, int]:
    value = record.get(key)
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        raise ProfileError(f"{where}: field {key!r} is not three non-negative integers")
    return (value[0], value[1], value[2])


def _request(record: dict[str, object], where: str) -> LaunchRequest | None:
    """The launch's request, None when the line has none (an older time file); malformed raises."""
    if not any(key in record for key in ("grid", "block", "shared", "args")):
        return None
    shared = record.get("shared")
    if not isinstance(shared, int) or isinstance(shared, bool) or shared < 0:
        raise ProfileError(f"{where}: field 'shared' is not a non-negative integer")
    if "args" not in record:
        raise ProfileError(f"{where}: field 'args' is missing")
    raw = record["args"]
    args: tuple[bytes | None, ...] | None = None
    if raw is not None:
        if not isinstance(raw, list):
            raise ProfileError(f"{where}: field 'args' is not a list or null")
        try:
            args = tuple(None if a is None else bytes.fromhex(a) for a in raw)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ProfileError(
                f"{where}: field 'args' holds something other than hex strings and null"
            ) from None
    return LaunchRequest(_dims(record, "grid", where), _dims(record, "block", where), shared, args)


def run_timed(
    cmd: Sequence[str],
    *,
    kernel_regex: str,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    library: str | os.PathLike[str] | None = None,
    quiesce: bool = False,
) -> TimedRun:
    """Run ``cmd`` with the native profiler's event timer on the kernels matching ``kernel_regex``
    (ECMAScript, searched in the mangled and the demangled name) and return their timed launches.
    ``quiesce``: each timed launch starts on an idle device with no persisting L2 lines (the ``quiesce``
    setting, FORMAT.md).

    Raises AppError when the program is missing, exits non-zero, is killed or times out, and ProfileError
    when no time file was completed or a launch could not be timed. A run that launched no matching
    kernel returns no launches.
    """
    if not kernel_regex:
        raise ValueError("kernel_regex must not be empty")
    run = run_jsonl_mode(
        cmd, "time", read_timing, cwd=cwd, env=judged_env(env), timeout_s=timeout_s, library=library,
        kernel=kernel_regex, quiesce="1" if quiesce else "0",
    )  # fmt: skip
    if not run.completed:
        why = (
            NO_EXIT_HANDLERS
            if run.partial
            else "CUDA never loaded the profiler (the program did not initialize CUDA, or no NVIDIA driver "
            "is present)"
        )
        raise ProfileError(
            f"no kernel times were written: {why}", log_tail=profiler_messages(run.app.stderr) or None
        )
    return TimedRun(
        launches=tuple(run.records), wall_s=run.app.wall_s, stdout=run.app.stdout, stderr=run.app.stderr
    )

"""Were the launches the judge timed the launches it judged?

The judge captures a candidate's launches to check its buffers, and times other runs of the same program to
measure its speedup. A program can tell those runs apart (a capture is slow; it can read its environment)
and do less work when it is timed: launch its kernel on one row in eight, with a smaller grid, or fewer
times. Every buffer it is judged on is then right, and the speedup is a lie. The timer records what each
launch asked the GPU to do (grid, block, dynamic shared memory and every argument's bytes:
``accordo.timing.LaunchRequest``); this module compares that with the captured launches.

Compared per kernel, as multisets (a multi-threaded or multi-process program may launch in another order):
the number of launches, the grid, the block, the dynamic shared memory, and the bytes of every parameter
that each capture saw as a value rather than a device pointer (pointers may differ from run to run). A
value that differs between two captures of the candidate (a seed taken from the clock) is not compared,
nor one the timer could not read; with one capture, a value that differs between its timed runs is not.
Every other value must be the same in each timed run as in the capture: a program that varies what it
asks for only when timed fails.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from intelliperf.contract.report import JudgeCheck

from .capture import Capture
from .timing import TimedLaunch

__all__ = ["LaunchSignature", "timed_launches_check"]

CHECK = "timed_launches"

Values = dict[tuple[str, int], Counter[bytes | None]]  # (kernel, parameter) -> its values over the launches


@dataclass(frozen=True)
class LaunchSignature:
    """What one launch of ``name`` asked for, apart from where its buffers are."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    values: tuple[tuple[int, bytes | None], ...] = ()  # (parameter index, bytes) of the values compared


def _value_params(captures: Sequence[Capture]) -> dict[str, frozenset[int]]:
    """Per kernel, the parameters every captured launch passed as a value (not a pointer, not unknown)."""
    found: dict[str, frozenset[int]] = {}
    for capture in captures:
        for launch in capture.launches:
            values = frozenset(p.index for p in launch.params if p.kind == "scalar")
            found[launch.name] = found[launch.name] & values if launch.name in found else values
    return found


def _captured_values(capture: Capture, params: dict[str, frozenset[int]]) -> Values:
    values: Values = {}
    for launch in capture.launches:
        for p in launch.params:
            if p.index in params.get(launch.name, frozenset()):
                values.setdefault((launch.name, p.index), Counter())[p.raw] += 1
    return values


def _timed_values(run: Sequence[TimedLaunch], params: dict[str, frozenset[int]]) -> Values:
    values: Values = {}
    for launch in run:
        args = launch.request.args if launch.request is not None and launch.request.args is not None else ()
        for index in params.get(launch.name, frozenset()):
            values.setdefault((launch.name, index), Counter())[
                args[index] if index < len(args) else None
            ] += 1
    return values


def _stable(seen: Sequence[Values], params: dict[str, frozenset[int]]) -> dict[str, frozenset[int]]:
    """The parameters whose values are the same multiset in every one of ``seen``."""
    keep: dict[str, frozenset[int]] = {}
    for name, indices in params.items():
        keep[name] = frozenset(
            i for i in indices if all(v.get((name, i)) == seen[0].get((name, i)) for v in seen[1:])
        )
    return keep


def _captured(capture: Capture, compared: dict[str, frozenset[int]]) -> Counter[LaunchSignature]:
    signatures: Counter[LaunchSignature] = Counter()
    for launch in capture.launches:
        assert launch.shape is not None
        wanted = compared.get(launch.name, frozenset())
        values = tuple((p.index, p.raw) for p in launch.params if p.index in wanted)
        shape = launch.shape
        signatures[LaunchSignature(launch.name, shape.grid, shape.block, shape.dynamic_shared, values)] += 1
    return signatures


def _timed(run: Sequence[TimedLaunch], compared: dict[str, frozenset[int]]) -> Counter[LaunchSignature]:
    signatures: Counter[LaunchSignature] = Counter()
    for launch in run:
        request = launch.request
        assert request is not None
        args = request.args if request.args is not None else ()
        values = tuple(
            (i, args[i] if i < len(args) else None) for i in sorted(compared.get(launch.name, frozenset()))
        )
        signatures[LaunchSignature(launch.name, request.grid, request.block, request.shared, values)] += 1
    return signatures


def _value(raw: bytes | None) -> str:
    if raw is None:
        return "not recorded"
    as_int = f" = {int.from_bytes(raw, 'little')}" if len(raw) in (1, 2, 4, 8) else ""
    return f"0x{raw.hex()}{as_int}"


def _difference(timed: LaunchSignature, captured: LaunchSignature) -> str:
    """The first thing in which two launches of one kernel differ, in words."""
    for what, t, c in (
        ("grid", timed.grid, captured.grid),
        ("block", timed.block, captured.block),
        ("dynamic shared memory", timed.shared, captured.shared),
    ):
        if t != c:
            return f"{what} {t} timed, {c} captured"
    theirs = dict(captured.values)
    for index, raw in timed.values:
        if theirs.get(index, raw) != raw:
            return f"parameter {index} was {_value(raw)} timed, {_value(theirs[index])} captured"
    return "the same shape, other parameter values"


def _problem(timed: Counter[LaunchSignature], captured: Counter[LaunchSignature]) -> str | None:
    """How a timed run's launches differ from the captured ones, or None."""
    if timed == captured:
        return None
    for name in sorted({s.name for s in timed} | {s.name for s in captured}):
        ours = sum(n for s, n in timed.items() if s.name == name)
        theirs = sum(n for s, n in captured.items() if s.name == name)
        if ours != theirs:
            return f"{name} was launched {ours} time(s) when timed and {theirs} when captured"
    extra = next(s for s in sorted(timed, key=repr) if timed[s] > captured[s])
    missing = next(s for s in sorted(captured, key=repr) if captured[s] > timed[s] and s.name == extra.name)
    count = timed[extra] - captured[extra]
    return (
        f"{count} launch(es) of {extra.name} asked for other work when timed: {_difference(extra, missing)}"
    )


def timed_launches_check(captures: Sequence[Capture], runs: Sequence[Sequence[TimedLaunch]]) -> JudgeCheck:
    """The ``timed_launches`` check of a candidate: each of its timed ``runs`` (the launches its timer
    recorded) against ``captures`` of the same program (the first is compared with; all of them say which
    values are stable). Failed with why when a run launched the kernel more or fewer times, with another
    shape, or with other values than the capture saw."""
    if not captures or any(x.shape is None for c in captures for x in c.launches):
        return JudgeCheck(name=CHECK, outcome="skipped", detail="the capture does not keep launch shapes")
    if not runs or any(x.request is None for run in runs for x in run):
        return JudgeCheck(
            name=CHECK, outcome="skipped", detail="the timer did not record what the launches asked for"
        )
    params = _value_params(captures)
    timed_values = [_timed_values(run, params) for run in runs]
    if len(captures) > 1:
        stable = _stable([_captured_values(c, params) for c in captures], params)
    else:
        stable = _stable(timed_values, params)
    unread = {key for values in timed_values for key, seen in values.items() if None in seen}
    compared = {name: frozenset(i for i in stable[name] if (name, i) not in unread) for name in stable}
    captured = _captured(captures[0], compared)
    for number, run in enumerate(runs, start=1):
        problem = _problem(_timed(run, compared), captured)
        if problem is not None:
            detail = (
                f"timed run {number} did other work than the captured run the candidate was judged on: "
                f"{problem}"
            )
            return JudgeCheck(name=CHECK, outcome="failed", detail=detail)
    varying = sum(len(params[name] - stable[name]) for name in params)
    unreadable = sum(len(stable[name] - compared[name]) for name in params)
    notes = [
        f"{count} {what} not compared"
        for count, what in (
            (varying, "argument(s) that differ from run to run"),
            (unreadable, "argument(s) the timer could not read"),
        )
        if count
    ]
    note = "; ".join(notes) or None
    return JudgeCheck(name=CHECK, outcome="passed", detail=note)

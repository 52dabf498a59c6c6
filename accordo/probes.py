"""Inputs a program did not make itself: the judge's checks against rewrites that lean on what memory held
or on the one input the program makes.

Two probes run the reference, and then every candidate, with their buffers set by capture mode's restore
(capture mode's ``restore`` setting) before each launch of the kernel:

* ``prefilled_nan``: every output the reference's kernel overwrites whole is filled with NaN bytes (0xFF)
  first. A rewrite that skips work because the output already holds the answer (from an earlier launch,
  or memory that happens to hold it) leaves NaN there.
* ``fresh_inputs``: every floating-point input the kernel only reads is shuffled (the captured values in
  another order, so the same distribution and range) with the captured minimum, maximum and zero placed
  at random elements, and every overwritten output is filled with random bytes. A rewrite tuned to the
  captured data, or one that returns results cached from an earlier call, differs from the reference.

A probe's buffers are made once per distinct snapshot, not once per launch: launches that read the same
captured input (a SAME record) read the same shuffle of it, and every output of one size is filled with the
same NaN or random bytes, written once and hard-linked (``write_restore``). A program's loop of launches on
one 64 MiB input then costs one shuffle, not one per launch (on the device's CPU a shuffle of 64 MiB takes
about 1.5 s).

An output counts as overwritten whole at a launch when the reference, run with that output full of NaN
bytes, ends the launch with exactly the bytes it ends it with normally: one it reads (an accumulation, a
``beta * C`` term) keeps the reference's own bytes in both probes, so no rewrite is held to what garbage
does to it. Integer inputs are never changed (they may be indices or offsets); without a signature
(Triton) a buffer is taken for floats only when its 32-bit words look like floats, not small integers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from .capture import Buffer, Capture, Launch, write_restore
from .signature import element_type, parse_parameters

__all__ = ["PROBES", "Probe", "ProbeName", "float_like", "overwritten", "snapshots", "write_probe"]

ProbeName = Literal["prefilled_nan", "fresh_inputs"]


@dataclass(frozen=True)
class Probe:
    name: ProbeName
    what: str  # how the runs' buffers were set, for messages


PROBES: tuple[Probe, ...] = (
    Probe("prefilled_nan", "with its outputs filled with NaN before every launch"),
    Probe(
        "fresh_inputs",
        "on fresh inputs (the captured values shuffled, with their minimum, maximum and zero) and its "
        "outputs filled with random bytes before every launch",
    ),
)
NAN_BYTE = 0xFF  # every float width's all-ones pattern is a NaN
FLOAT_DTYPES = {"float16": np.float16, "bfloat16": None, "float32": np.float32, "float64": np.float64}
SMALL_INT = 1 << 23  # float32 words of ordinary values read as integers are far larger than this

Key = tuple[int, int]  # (launch seq, parameter index) of a snapshot owner


def snapshots(capture: Capture, params: frozenset[int], *, of: bool = True) -> set[Key]:
    """The before-snapshots of ``capture`` that belong to ``params`` (``of=False``: to any other)."""
    return {
        (launch.seq, b.param_index)
        for launch in capture.launches
        for b in launch.buffers
        if b.phase == "before" and (b.param_index in params) == of
    }


def overwritten(original: Capture, prefilled: Capture, candidates: set[Key]) -> set[Key]:
    """Of the ``candidates`` (snapshots filled with NaN bytes in the ``prefilled`` run), those whose bytes
    after the launch are the ``original`` run's: outputs the kernel overwrites whole."""
    launches = {launch.seq: launch for launch in prefilled.launches}
    whole = set()
    for launch in original.launches:
        other = launches.get(launch.seq)
        if other is None or other.errors:
            continue
        for seq, param in candidates:
            if seq != launch.seq:
                continue
            mine, theirs = launch.buffer(param, "after"), other.buffer(param, "after")
            if mine is not None and theirs is not None and mine.same_as(theirs):
                whole.add((seq, param))
    return whole


def float_like(words: np.ndarray) -> bool:
    """Whether 32-bit ``words`` look like float32 values rather than small integers (indices, counts):
    most nonzero words of ordinary floats are far from zero when read as integers."""
    nonzero = words[words != 0]
    if nonzero.size == 0:
        return False
    return bool(np.count_nonzero(np.abs(nonzero.astype(np.int64)) >= SMALL_INT) >= 0.9 * nonzero.size)


def _float_dtype(launch: Launch, param_index: int, buffer: Buffer) -> np.dtype | None:
    """The numpy float type to shuffle ``buffer`` as, or None to leave it alone."""
    types = parse_parameters(launch.demangled)
    if types is not None:
        info = types[param_index] if param_index < len(types) else None
        element = element_type(info) if info is not None else None
    else:
        element = "float32" if buffer.nbytes % 4 == 0 and float_like(buffer.view(np.int32)) else None
    dtype = FLOAT_DTYPES.get(element or "")
    if dtype is None or buffer.nbytes % np.dtype(dtype).itemsize:
        return None
    return np.dtype(dtype)


def _shuffled(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The finite ``values`` in another order, with their minimum, maximum and zero at random places."""
    out = values.copy()
    finite = np.flatnonzero(np.isfinite(out))
    if finite.size < 2:
        return out
    out[finite] = out[rng.permutation(finite)]
    edges = np.array([out[finite].min(), out[finite].max(), 0.0], dtype=out.dtype)
    if finite.size >= 8:
        out[rng.choice(finite, size=edges.size, replace=False)] = edges
    return out


def write_probe(
    capture: Capture,
    folder: str | os.PathLike[str],
    probe: ProbeName,
    *,
    outputs: set[Key],
    inputs: set[Key] = frozenset(),  # type: ignore[assignment]
    seed: int = 0,
) -> tuple[Path, int]:
    """The restore folder of ``probe`` for ``capture``'s launches: ``outputs`` (snapshots to fill) as the
    probe fills them, ``inputs`` (read-only snapshots) shuffled for ``fresh_inputs``, every other
    snapshot as captured; and how many snapshots it changed."""
    rng = np.random.default_rng(seed)
    changed = 0
    fills: dict[int, bytes] = {}  # output size -> its NaN or random bytes
    # (kernel, parameter, which bytes of which file) -> the shuffle of that input snapshot
    shuffles: dict[tuple[str, int, int, int, int], bytes | None] = {}

    def fill(nbytes: int) -> bytes:
        if nbytes not in fills:
            fills[nbytes] = bytes([NAN_BYTE]) * nbytes if probe == "prefilled_nan" else rng.bytes(nbytes)
        return fills[nbytes]

    def shuffle(launch: Launch, buffer: Buffer) -> bytes | None:
        key = (launch.demangled, buffer.param_index, buffer.source_id, buffer.file_offset, buffer.nbytes)
        if key not in shuffles:
            dtype = _float_dtype(launch, buffer.param_index, buffer)
            shuffles[key] = _shuffled(buffer.view(dtype), rng).tobytes() if dtype is not None else None
        return shuffles[key]

    def filler(launch: Launch, buffer: Buffer) -> bytes | None:
        nonlocal changed
        key = (launch.seq, buffer.param_index)
        data = None
        if key in outputs:
            data = fill(buffer.nbytes)
        elif probe == "fresh_inputs" and key in inputs:
            data = shuffle(launch, buffer)
        changed += data is not None
        return data

    return write_restore(capture, folder, filler), changed

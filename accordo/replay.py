"""Replay of captured launches: a kernel run again, alone, on the inputs a capture holds for one launch.

A capture (profiler/native/FORMAT.md) holds, for every launch of the kernels it matched, the launch's
parameters, the bytes of every allocation its pointer parameters reach before and after the kernel, its
launch shape (SHAPE) and the cubin its kernel came from (MODULE). A replay loads that cubin into a fresh
context, allocates each allocation anew, fills it with the before-snapshot, patches the pointer parameters
to the new allocations (same offsets) and launches the kernel with the captured shape and scalars:

* ``outputs``: every launch of a capture replayed once, written as a capture whose after-snapshots are
  what the replayed kernel wrote, so accordo.compare judges it like any candidate capture. A candidate's
  kernel replayed on the reference's inputs must write the reference's outputs by itself: work done by
  another kernel or on another stream inside the captured launch does not count.
* ``time``: one launch of a reference capture and the same launch of a candidate capture, timed
  alternately with CUDA events around each launch, inputs restored before every launch; ``cold`` flushes
  L2 before each launch (a write of twice its size, queued right before the kernel), ``warm`` does not. A
  spin kernel holds the stream while the host queues each flush-event-launch-event sequence, so a short
  kernel's time holds no host launch overhead.

It cannot replay (``replay_problem``) a launch without SHAPE or MODULE (a capture from an older library),
one made inside a CUDA graph capture, one with a parameter whose value was unavailable, or one whose
snapshots are incomplete. Memory reached only through pointers inside structs, or a module's own
``__device__``/``__constant__`` variables that the program set, is not in the capture: every replayed
launch starts from the module's variables as loaded (accordo.cubin_variables; a work-queue counter the
program zeroes before each launch replays right, and the second of two timed launches does not find the
queue drained by the first), and where the program had set them otherwise the reference's own replay
differs from its capture, which accordo.replay_check reports as replay not applicable.

Runs as ``python -m accordo.replay outputs CAPTURE OUT`` or ``python -m accordo.replay time REF CAND``
(JSON on stdout), in a process of its own: a kernel that faults leaves its context unusable.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intelliperf.errors import ProfileError

from .capture import Capture, Launch, read_capture
from .capture_writer import CaptureWriter
from .cubin_variables import device_variables
from .cuda_driver import Driver, DriverError

__all__ = ["Prepared", "prepare", "replay_outputs", "replay_problem", "replay_times", "timed_launch"]

MAX_ITERATIONS = 1000
MIN_ITERATIONS = 10
HOLD_NS = 200_000  # the stream held while the host queues one timed launch (ctypes: tens of microseconds)


def replay_problem(capture: Capture, launch: Launch) -> str | None:
    """Why ``launch`` of ``capture`` cannot be replayed, or None."""
    label = f"launch {launch.launch_index + 1} of {launch.demangled}"
    if launch.shape is None:
        return f"{label} has no launch shape (a capture from a library without SHAPE records)"
    if launch.shape.graph_capture:
        return f"{label} was made while its stream was captured into a CUDA graph"
    if capture.module_of(launch) is None:
        return f"{label}: the capture holds no module with its kernel"
    if any(p.kind == "unavailable" for p in launch.params):
        return f"{label} has a parameter whose value was unavailable"
    if not launch.complete:
        return f"{label} has incomplete snapshots" + (f" ({launch.errors[0]})" if launch.errors else "")
    return None


@dataclass
class _Allocation:
    owner: int  # the first parameter pointing into it (its snapshots carry this index)
    base: int  # the captured allocation's address
    nbytes: int
    device: int  # the replay's allocation
    pristine: int  # a second one holding the bytes before the kernel, copied back before every launch
    window: tuple[int, int]  # (offset, nbytes) of the snapshot inside the allocation


@dataclass
class _Variable:
    name: str
    device: int  # the module variable's address
    pristine: int  # a copy of what it held when the module was loaded
    nbytes: int


@dataclass
class Loaded:
    """A captured module loaded once per replay: its kernels by mangled name, and its writable variables
    with a copy of their load-time bytes (accordo.cubin_variables)."""

    handle: Any
    functions: dict[str, Any]
    variables: list[_Variable]


@dataclass
class Prepared:
    """One launch set up on the device: run it with ``restore`` and ``launch``. ``restore`` puts back the
    inputs the capture holds and the module's variables as loaded, so every replayed launch starts alike."""

    launch: Launch
    function: Any
    params: list[bytes]
    allocations: list[_Allocation]
    variables: list[_Variable]

    def restore(self, driver: Driver) -> None:
        for a in self.allocations:
            driver.copy(a.device, a.pristine, a.nbytes)
        for v in self.variables:
            driver.copy(v.device, v.pristine, v.nbytes)

    def run(self, driver: Driver) -> None:
        shape = self.launch.shape
        assert shape is not None
        driver.launch(self.function, shape.grid, shape.block, shape.dynamic_shared, self.params)

    def outputs(self, driver: Driver) -> dict[int, bytes]:
        """Each allocation's snapshot window after the kernel, by owner parameter."""
        driver.synchronize()
        return {a.owner: driver.download(a.device + a.window[0], a.window[1]) for a in self.allocations}

    def free(self, driver: Driver) -> None:
        for a in self.allocations:
            driver.free(a.device)
            driver.free(a.pristine)


Modules = dict[int, Loaded]  # the capture's modules loaded so far, by module index


def load(driver: Driver, image: bytes) -> Loaded:
    """``image`` loaded, and a copy of each writable variable's load-time bytes kept beside it."""
    handle = driver.load_module(image)
    variables = []
    for name in device_variables(image):
        device, nbytes = driver.module_variable(handle, name)
        pristine = driver.alloc(nbytes)
        driver.copy(pristine, device, nbytes)
        variables.append(_Variable(name, device, pristine, nbytes))
    return Loaded(handle, {}, variables)


def prepare(driver: Driver, capture: Capture, launch: Launch, modules: Modules) -> Prepared:
    """Load ``launch``'s module (once per capture: ``modules``), its kernel and its inputs onto the device.
    A module holds many kernels (a template's instantiations) and its variables are shared by them."""
    problem = replay_problem(capture, launch)
    if problem is not None:
        raise ValueError(problem)
    module = capture.module_of(launch)
    assert module is not None and launch.shape is not None
    if module.index not in modules:
        modules[module.index] = load(driver, module.image)
    loaded = modules[module.index]
    if launch.name not in loaded.functions:
        loaded.functions[launch.name] = driver.module_function(loaded.handle, launch.name)
    function = loaded.functions[launch.name]
    driver.allow_dynamic_shared(function, launch.shape.dynamic_shared)

    allocations: dict[int, _Allocation] = {}
    params: list[bytes] = []
    for p in launch.params:
        if p.kind != "pointer":
            params.append(p.raw)
            continue
        assert p.alloc_base is not None and p.alloc_size is not None and p.pointer is not None
        allocation = allocations.get(p.alloc_base)
        if allocation is None:
            before = launch.buffer(p.index, "before")
            assert before is not None  # replay_problem: complete
            device, pristine = driver.alloc(p.alloc_size), driver.alloc(p.alloc_size)
            window = (before.base - p.alloc_base, before.nbytes)
            driver.fill(pristine, 0, p.alloc_size)
            driver.synchronize()
            driver.upload(pristine + window[0], memoryview(before.data))
            allocation = _Allocation(p.index, p.alloc_base, p.alloc_size, device, pristine, window)
            allocations[p.alloc_base] = allocation
        params.append(struct.pack("<Q", allocation.device + (p.pointer - p.alloc_base)))
    return Prepared(launch, function, params, list(allocations.values()), loaded.variables)


def replay_outputs(capture_path: Path, out_path: Path, driver: Driver) -> dict[str, object]:
    """Replay every launch of the capture once; write the replayed capture to ``out_path``."""
    capture = read_capture(capture_path)
    for launch in capture.launches:
        problem = replay_problem(capture, launch)
        if problem is not None:
            return {"problem": problem}
    modules: Modules = {}
    with CaptureWriter(out_path) as writer:
        for module in capture.modules:
            writer.module(module, module.index)
        for launch in capture.launches:
            prepared = prepare(driver, capture, launch, modules)
            prepared.restore(driver)
            prepared.run(driver)
            after = prepared.outputs(driver)
            prepared.free(driver)
            shape = launch.shape
            writer.launch(launch, launch.seq, module=shape.module if shape else None, after=after)
    return {"launches": len(capture.launches)}


def timed_launch(capture: Capture, launch_index: int | None = None) -> Launch:
    """The launch to time: ``launch_index`` of the first kernel, else its second launch (the first one
    pays for module loading in the application), else its first."""
    launches = capture.launches
    if not launches:
        raise ValueError(f"{capture.path} holds no launch")
    first = [x for x in launches if x.name == launches[0].name]
    if launch_index is None:
        launch_index = 1 if len(first) > 1 else 0
    if not 0 <= launch_index < len(first):
        raise ValueError(
            f"{capture.path} has {len(first)} launches of {first[0].demangled}, no launch {launch_index + 1}"
        )
    return first[launch_index]


def replay_times(
    reference_path: Path, candidate_path: Path, driver: Driver, *, seconds: float, launch_index: int | None
) -> dict[str, object]:
    """Cold and warm times (ns) of the reference's and the candidate's kernel on one launch's inputs, in
    alternating order, until ``seconds`` passed (at least MIN_ITERATIONS, at most MAX_ITERATIONS)."""
    sides = []
    for path in (reference_path, candidate_path):
        capture = read_capture(path)
        launch = timed_launch(capture, launch_index)
        problem = replay_problem(capture, launch)
        if problem is not None:
            return {"problem": f"{path.name}: {problem}"}
        sides.append(prepare(driver, capture, launch, {}))
    flush_bytes = 2 * driver.l2_bytes()
    flush = driver.alloc(flush_bytes)
    start, end = driver.event(), driver.event()
    times: dict[str, list[list[float]]] = {"cold": [[], []], "warm": [[], []]}
    began = time.monotonic()
    iteration = 0
    while iteration < MAX_ITERATIONS and (iteration < MIN_ITERATIONS or time.monotonic() - began < seconds):
        order = (0, 1) if iteration % 2 == 0 else (1, 0)
        for side in order:
            for flavour in ("cold", "warm"):
                sides[side].restore(driver)
                driver.hold(HOLD_NS)
                if flavour == "cold":  # right before the kernel, its dirty lines left in L2 as in an app
                    driver.fill(flush, iteration & 0xFF, flush_bytes)
                driver.record(start)
                sides[side].run(driver)
                driver.record(end)
                times[flavour][side].append(driver.elapsed_ns(start, end))
        iteration += 1
    return {
        "launch": sides[0].launch.launch_index,
        "kernels": [s.launch.demangled for s in sides],
        "iterations": iteration,
        "l2_flush_bytes": flush_bytes,
        "reference_cold_ns": times["cold"][0],
        "candidate_cold_ns": times["cold"][1],
        "reference_warm_ns": times["warm"][0],
        "candidate_warm_ns": times["warm"][1],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m accordo.replay", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    outputs = sub.add_parser("outputs", help="replay every launch once; write the replayed capture")
    outputs.add_argument("capture", type=Path)
    outputs.add_argument("out", type=Path)
    timing = sub.add_parser("time", help="time one launch of two captures' kernels, alternately")
    timing.add_argument("reference", type=Path)
    timing.add_argument("candidate", type=Path)
    timing.add_argument("--seconds", type=float, default=2.0)
    timing.add_argument("--launch", type=int, default=None, help="0-based launch of the first kernel")
    args = parser.parse_args(argv)
    try:
        driver = Driver()
        if args.command == "outputs":
            result = replay_outputs(args.capture, args.out, driver)
        else:
            result = replay_times(
                args.reference, args.candidate, driver, seconds=args.seconds, launch_index=args.launch
            )
    except (DriverError, ProfileError, ValueError) as exc:
        result = {"error": str(exc)}
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())

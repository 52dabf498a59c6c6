"""Runs of one benchmark side by side on the GPUs of one machine: the programs dealt into one group per
GPU, each group run by a child process that sees only its GPU (CUDA_VISIBLE_DEVICES) and runs on a slice
of the machine's cores of its own, so that one group's compilers and host threads do not land on the cores
another group's timed runs use. Each program is still measured against itself on one GPU; what the groups
share is the host (memory bandwidth, PCIe), which the benchmark's README says where it uses this."""

from __future__ import annotations

import os
import statistics
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Group:
    gpu: str
    programs: tuple[str, ...]
    cores: tuple[int, ...]
    out: Path
    log: Path


@dataclass(frozen=True)
class Finished:
    group: Group
    exit_code: int


def deal(programs: Sequence[str], cost_s: Mapping[str, float], groups: int) -> list[list[str]]:
    """``programs`` in ``groups`` groups of about equal expected seconds: the longest first, each to the
    group with the fewest seconds so far (a program without an earlier cost counts as the median known
    cost, 1 s when none is known). Inside a group the programs keep their order in ``programs``."""
    if groups < 1:
        raise ValueError(f"programs are dealt into at least one group, not {groups}")
    known = [cost_s[name] for name in programs if name in cost_s]
    default = statistics.median(known) if known else 1.0
    expected = {name: cost_s.get(name, default) for name in programs}
    load = [0.0] * groups
    chosen: dict[str, int] = {}
    for name in sorted(programs, key=lambda n: -expected[n]):  # stable: equal costs keep their order
        group = min(range(groups), key=lambda g: load[g])
        chosen[name] = group
        load[group] += expected[name]
    return [[name for name in programs if chosen[name] == group] for group in range(groups)]


def core_slices(cores: Sequence[int], groups: int) -> list[tuple[int, ...]]:
    """``cores`` cut into ``groups`` contiguous slices of (nearly) equal size; with fewer cores than
    groups, the groups share them round the list."""
    ordered = sorted(cores)
    if len(ordered) < groups:
        return [(ordered[g % len(ordered)],) for g in range(groups)]
    size, extra = divmod(len(ordered), groups)
    slices, start = [], 0
    for g in range(groups):
        end = start + size + (1 if g < extra else 0)
        slices.append(tuple(ordered[start:end]))
        start = end
    return slices


def plan(
    programs: Sequence[str], cost_s: Mapping[str, float], gpus: Sequence[str], folder: Path
) -> list[Group]:
    """One group per GPU that gets programs, each with its cores and its output and log in ``folder``."""
    dealt = deal(programs, cost_s, len(gpus))
    cores = core_slices(sorted(os.sched_getaffinity(0)), len(gpus))
    return [
        Group(gpu, tuple(names), cores[i], folder / f"gpu{gpu}.json", folder / f"gpu{gpu}.log")
        for i, (gpu, names) in enumerate(zip(gpus, dealt, strict=True))
        if names
    ]


def run_groups(groups: Sequence[Group], argv_for: Callable[[Group], list[str]], cwd: Path) -> list[Finished]:
    """Each group's child (``argv_for(group)``) started at once, on its GPU and its cores, its output in its
    log; waits for all of them."""
    children = []
    for group in groups:
        env = os.environ | {"CUDA_VISIBLE_DEVICES": group.gpu}
        group.out.parent.mkdir(parents=True, exist_ok=True)
        with group.log.open("wb") as log:
            child = subprocess.Popen(
                argv_for(group),
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=lambda cores=group.cores: os.sched_setaffinity(0, cores),
            )
        children.append((group, child))
    return [Finished(group, child.wait()) for group, child in children]

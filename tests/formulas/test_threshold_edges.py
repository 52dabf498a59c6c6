"""Every threshold that decides whether a bottleneck is present, or how severe it is, held at its edge.

The recorded examples sit far from the thresholds (a concentration of 63 against 8, an excess share of 94%
against 20%), so without this file a threshold could change and every test would still pass. Here each
threshold is held twice:

- its value: the formula's constant, imported, must equal the value written below;
- its edge: one input of a recorded profile (tests/fixtures/gpu, via tests.recorded.main_profile) is
  scaled until the formula's decision quantity lands exactly on the threshold, and again a hair
  (relative `HAIR`) short of it; the decision (`Diagnosis.present`, or `severity`) must flip between the
  two. Every other input stays as recorded. The decision quantity is computed here as the formula
  computes it, so a change to the comparison (`<` for `<=`) or to the arithmetic behind it fails too.

A threshold changes only together with this file, and the commit says why: what was measured that the
old value got wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import pytest

from formulas import atomic_contention, branch_divergence, memory_locality, occupancy, register_pressure
from formulas.atomic_contention import AtomicContention
from formulas.bank_conflict import BankConflict
from formulas.base import Formula
from formulas.branch_divergence import BranchDivergence
from formulas.excess import ExcessShareFormula
from formulas.memory_access import MemoryAccess
from formulas.memory_locality import MemoryLocality
from formulas.occupancy import Occupancy
from formulas.register_pressure import RegisterPressure
from formulas.throughput import UNIT_QUANTITIES, UNITS, busiest_unit
from intelliperf.contract.gpu_facts import facts_for
from intelliperf.contract.profile import KernelProfile, Quantity
from tests.recorded import main_profile

HAIR = 1e-6
"""How far short of a threshold the second profile lands, relative: any change of a threshold by more
than this moves the flip past one of the two profiles."""

HIGH, MEDIUM = 0.30, 0.10
"""formulas.base.severity_for's cut-offs: literals in its code, so there is no constant to import and
this file states them itself."""

recorded = cache(main_profile)
UNIT_BUSY = tuple(UNIT_QUANTITIES[unit] for unit in UNITS)


# The decision quantities, as the formulas compute them (same operations, same order).


def concentration(p: KernelProfile) -> float:
    return p.metric(Quantity.L2_ATOMICS_BUSIEST_SLICE) / p.metric(Quantity.L2_ATOMICS_MEAN_SLICE)


def atomic_saving(p: KernelProfile) -> float:
    serial_ns = p.metric(Quantity.L2_ATOMICS_BUSIEST_SLICE) * facts_for(p.arch).same_address_atomic_ns
    return min(1.0, serial_ns / p.duration_ns) * (1.0 - 1.0 / concentration(p))


def excess_share(formula: ExcessShareFormula) -> Callable[[KernelProfile], float]:
    return lambda p: p.metric(formula.excessive) / p.metric(formula.total)


def excess_saving(formula: ExcessShareFormula) -> Callable[[KernelProfile], float]:
    def saving(p: KernelProfile) -> float:
        estimate = min(1.0, excess_share(formula)(p) * formula.utilization(p)[0])
        floor = formula.untouched_busy(p)
        return estimate if floor is None or 1.0 - floor[0] >= estimate else max(0.0, 1.0 - floor[0])

    return saving


def active_share(p: KernelProfile) -> float:
    """Active lanes over the warp: the formula compares active >= MAX_ACTIVE_SHARE * lanes, the same
    decision exactly (lanes is a power of two)."""
    return p.metric(Quantity.ACTIVE_THREADS_PER_INSTRUCTION) / facts_for(p.arch).warp_size


def divergence_saving(p: KernelProfile) -> float:
    idle = max(0.0, 1.0 - active_share(p))
    return min(1.0, idle * (p.metric(Quantity.ISSUE_BUSY_PCT) / 100.0))


def reuse(p: KernelProfile) -> float:
    needed = min(p.metric(Quantity.GLOBAL_LOAD_SECTORS_IDEAL), p.metric(Quantity.L2_SECTORS_READ_BY_L1))
    return needed / max(p.metric(Quantity.DRAM_SECTORS_READ), 1.0)


def locality_saving(p: KernelProfile) -> float:
    busy, _ = busiest_unit(p, MemoryLocality.units)
    return min(1.0, busy * max(0.0, 1.0 - 1.0 / reuse(p)))


def local_share(p: KernelProfile) -> float:
    local = p.metric(Quantity.LOCAL_BYTES_LOADED) + p.metric(Quantity.LOCAL_BYTES_STORED)
    global_ = p.metric(Quantity.GLOBAL_BYTES_LOADED) + p.metric(Quantity.GLOBAL_BYTES_STORED)
    return local / (local + global_)


def spill_saving(p: KernelProfile) -> float:
    busy, _ = busiest_unit(p, RegisterPressure.units)
    return min(1.0, local_share(p) * busy)


def achieved_occupancy(p: KernelProfile) -> float:
    return p.metric(Quantity.ACHIEVED_OCCUPANCY_PCT) / 100.0


@dataclass(frozen=True)
class Edge:
    name: str
    """Where the threshold lives (module.CONSTANT, or Class.attribute)."""
    constant: float | None
    """The formula's constant, imported (None for severity_for's literals: the flip alone holds them)."""
    value: float
    """The value this file holds it at."""
    formula: Formula
    example: str
    """The recorded example whose main kernel's profile is moved onto the edge."""
    knob: tuple[Quantity, ...]
    """The recorded inputs scaled, all by one factor (KERNEL_TIME_NS scales the profile's duration too)."""
    quantity: Callable[[KernelProfile], float]
    """What the formula compares with the threshold."""
    decides: str = "present"
    at: object = True
    """The decision with the quantity exactly at the threshold."""
    short: object = False
    """The decision a hair short of it."""

    def __str__(self) -> str:
        return self.name


bank, access = BankConflict(), MemoryAccess()
EDGES = [
    Edge(
        "atomic_contention.MIN_CONCENTRATION",
        atomic_contention.MIN_CONCENTRATION,
        8.0,
        AtomicContention(),
        "histogram_atomic",
        (Quantity.L2_ATOMICS_MEAN_SLICE,),
        concentration,
    ),
    Edge(
        "atomic_contention.MIN_SAVING",
        atomic_contention.MIN_SAVING,
        0.15,
        AtomicContention(),
        "histogram_atomic",
        (Quantity.KERNEL_TIME_NS,),
        atomic_saving,
    ),
    Edge(
        "BankConflict.min_excess_share",
        BankConflict.min_excess_share,
        0.20,
        bank,
        "transpose_bank",
        (Quantity.SHARED_ACCESS_UNITS_EXCESS,),
        excess_share(bank),
    ),
    Edge(
        "BankConflict.min_saving",
        BankConflict.min_saving,
        0.05,
        bank,
        "transpose_bank",
        (Quantity.SHARED_PIPE_BUSY_PCT,),
        excess_saving(bank),
    ),
    Edge(
        "MemoryAccess.min_excess_share",
        MemoryAccess.min_excess_share,
        0.25,
        access,
        "tile_sums",
        (Quantity.GLOBAL_SECTORS_EXCESS,),
        excess_share(access),
    ),
    Edge(
        "MemoryAccess.min_saving",
        MemoryAccess.min_saving,
        0.05,
        access,
        "tile_sums",
        UNIT_BUSY,
        excess_saving(access),
    ),
    Edge(  # a maximum: present below it, absent at it
        "branch_divergence.MAX_ACTIVE_SHARE",
        branch_divergence.MAX_ACTIVE_SHARE,
        0.75,
        BranchDivergence(),
        "divergent_lanes",
        (Quantity.ACTIVE_THREADS_PER_INSTRUCTION,),
        active_share,
        at=False,
        short=True,
    ),
    Edge(
        "branch_divergence.MIN_SAVING",
        branch_divergence.MIN_SAVING,
        0.10,
        BranchDivergence(),
        "divergent_lanes",
        (Quantity.ISSUE_BUSY_PCT,),
        divergence_saving,
    ),
    Edge(
        "memory_locality.MIN_REUSE",
        memory_locality.MIN_REUSE,
        4.0,
        MemoryLocality(),
        "vertical_stencil",
        (Quantity.DRAM_SECTORS_READ,),
        reuse,
    ),
    Edge(
        "memory_locality.MIN_SAVING",
        memory_locality.MIN_SAVING,
        0.10,
        MemoryLocality(),
        "vertical_stencil",
        (Quantity.L2_BUSY_PCT,),
        locality_saving,
    ),
    Edge(
        "register_pressure.MIN_LOCAL_SHARE",
        register_pressure.MIN_LOCAL_SHARE,
        0.25,
        RegisterPressure(),
        "triton_spill",
        (Quantity.LOCAL_BYTES_LOADED, Quantity.LOCAL_BYTES_STORED),
        local_share,
    ),
    Edge(
        "register_pressure.MIN_SAVING",
        register_pressure.MIN_SAVING,
        0.10,
        RegisterPressure(),
        "triton_spill",
        UNIT_BUSY,
        spill_saving,
    ),
    Edge(  # a maximum: present below it, absent at it
        "occupancy.MAX_OCCUPANCY (achieved)",
        occupancy.MAX_OCCUPANCY,
        0.25,
        Occupancy(),
        "triton_spill",
        (Quantity.ACHIEVED_OCCUPANCY_PCT,),
        achieved_occupancy,
        at=False,
        short=True,
    ),
    # severity_for's cut-offs, held on a formula whose own minimum saving (5%) lies below both.
    *(
        Edge(
            f"severity_for {upper} from {cut:.2f}",
            None,
            cut,
            bank,
            "transpose_bank",
            (Quantity.SHARED_PIPE_BUSY_PCT,),
            excess_saving(bank),
            decides="severity",
            at=upper,
            short=lower,
        )
        for cut, upper, lower in ((HIGH, "high", "medium"), (MEDIUM, "medium", "low"))
    ),
]


def scaled(profile: KernelProfile, knob: tuple[Quantity, ...], factor: float) -> KernelProfile:
    metrics = dict(profile.metrics)
    for name in knob:
        metrics[name] = profile.metrics[name] * factor
    duration = profile.duration_ns * factor if Quantity.KERNEL_TIME_NS in knob else profile.duration_ns
    return replace(profile, metrics=metrics, duration_ns=duration)


def landed(edge: Edge, target: float) -> KernelProfile:
    """The recorded profile with `edge.knob` scaled by the factor at which `edge.quantity` first reaches
    `target`: at least `target` there, below it at the neighbouring float factor on the other side. Found
    by doubling the factor (or halving it) until the quantity crosses `target`, then by bisection down to
    adjacent floats."""
    profile = recorded(edge.example)

    def reaches(factor: float) -> bool:
        return edge.quantity(scaled(profile, edge.knob, factor)) >= target

    side = reaches(1.0)
    other = next(f for k in range(1, 64) for f in (2.0**k, 2.0**-k) if reaches(f) != side)
    lo, hi = sorted((1.0, other))
    lo_reaches = reaches(lo)
    while lo < (mid := (lo + hi) / 2) < hi:
        if reaches(mid) == lo_reaches:
            lo = mid
        else:
            hi = mid
    return scaled(profile, edge.knob, lo if lo_reaches else hi)


@pytest.mark.parametrize("edge", [e for e in EDGES if e.constant is not None], ids=str)
def test_the_threshold_is_the_value_held_here(edge: Edge) -> None:
    assert edge.constant == edge.value, (
        f"{edge.name} is {edge.constant}, tests/formulas/test_threshold_edges.py holds {edge.value}: "
        "change both, and say why"
    )


@pytest.mark.parametrize("edge", EDGES, ids=str)
def test_the_decision_flips_exactly_at_the_threshold(edge: Edge) -> None:
    at, short = landed(edge, edge.value), landed(edge, edge.value * (1 - HAIR))
    assert edge.quantity(at) == edge.value, (
        "no input value puts the quantity exactly on the threshold (in floats it steps from just below to "
        "just above it): hold it on another recorded example"
    )
    assert edge.quantity(short) < edge.value
    decided_at = edge.formula.evaluate(at)
    decided_short = edge.formula.evaluate(short)
    assert decided_at.decided and decided_short.decided
    assert getattr(decided_at, edge.decides) == edge.at, decided_at.reasoning
    assert getattr(decided_short, edge.decides) == edge.short, decided_short.reasoning

"""Accordo against rewrites that cheat (GPU machine): is every cheat rejected, and every correct rewrite
accepted, every time?

The corpus is real programs: each a candidate against a real reference, built from examples/accordo_repeat
(a row norm launched 10 times on one output, in CUDA C++ and Triton), examples/accordo_sums (a float sum,
noisy through atomicAdd) and examples/accordo_cases (a block sum). ``CHEATS`` are rewrites of the kinds
met in public LLM kernel benchmarks; ``CORRECT`` are reordered reductions launched repeatedly, other launch
shapes, vectorized loads and a Triton rewrite. Each reference is captured once; every candidate is then
judged (``accordo.validate.check_candidate``: both comparisons, the probes, the launch pattern and the
replay; a ``timed`` case, one that cheats only when timed, also ``judge_timing``) round after round, every
case once a round, until ``--repeats`` rounds or ``--budget-s`` run out, so that every case gets the same
number of judgements. The judgements of a round run ``--jobs`` at a time (each is a handful of application
runs of its own; the one timed cheat is caught by what its timed launches asked for, which other processes
on the GPU do not change). ``--resume`` carries on from earlier runs' results on the same device, so that 20
rounds can span several sessions of the GPU machine, or several GPUs of one host: one ``--no-pairs`` run per
GPU (``CUDA_VISIBLE_DEVICES``), then a run that resumes from all of them adds them up (``seconds`` is then
the sum of the runs' seconds, not the wall time). A run with no round to run (``--budget-s 0``, or as many
rounds resumed as ``--repeats``) only adds up, anywhere, with no GPU.

Then the replay timer (``accordo.replay_check.replay_speedups``, L2 flushed) is set against the CUDA-event
harness (benchmarks/event_harness.py, its own driver context, timing loop and L2 flush) on the same two
captured launches of each pair in ``TIMED_PAIRS``: ``replay_speedup_error`` is the largest relative
difference of the two speedups (target at most 0.02).

    python -m benchmarks.integrity --out benchmarks/results/integrity.json [--repeats 20] [--budget-s 480]
                                   [--jobs 8] [--resume EARLIER.json ...] [--no-pairs]

The results: ``cheats`` and ``cheats_rejected`` (the share of judgements that rejected a cheat; target
1.0) with, per cheat, the checks that caught it and a reason; ``correct`` and ``correct_accepted``
(target 1.0); ``rounds`` (judgements per case); ``replay_speedup_error`` and ``replay_pairs``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from accordo.capture import Capture, read_capture, run_capture
from accordo.capture_writer import write_capture
from accordo.cuda_driver import Driver
from accordo.replay import timed_launch
from accordo.replay_check import ReplaySpeedups, replay_speedups
from accordo.signature import kernel_pattern
from accordo.validate import Reference, ValidationOptions, capture_reference, check_candidate, judge_timing
from benchmarks.common import device_name
from benchmarks.event_harness import EventHarness
from intelliperf.contract.report import ValidationResult

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SUMS_N = "262221"  # as tests/accordo/test_gpu_validate_sums.py: noisy, quick to capture


@dataclass(frozen=True)
class Side:
    folder: str  # under examples/
    kernel: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # what the rewrite does, in words
    reference: Side
    candidate: tuple[str, ...]
    timed: bool = False  # judged with its timing too (judge_timing), not only check_candidate

    @property
    def folder(self) -> str:
        return self.reference.folder


def _python(*args: str) -> tuple[str, ...]:
    return (sys.executable, *args)


ROW_NORM = Side("accordo_repeat", "row_norm", ("bin/ref",))
ROW_NORM_TRITON = Side("accordo_repeat", "row_norm", _python("row_norm.py", "16"))
SIGNED = Side("accordo_sums", "sum", ("bin/ref", SUMS_N, "1", "signed"))
DRIFT = Side("accordo_sums", "sum", ("bin/ref", SUMS_N, "1", "drift"))
BLOCK_SUM = Side("accordo_cases", "block_sum", ("bin/ref",))

CHEATS: tuple[Case, ...] = (
    Case(
        "skip_same_out",
        "work skipped when the output pointer did not change",
        ROW_NORM,
        ("bin/skip_same_out",),
    ),
    Case("lazy", "memory that happens to hold the answer taken for it", ROW_NORM, ("bin/lazy",)),
    Case("regen", "tuned to the one input: regenerates it instead of reading it", ROW_NORM, ("bin/regen",)),
    Case("late", "outputs written on a later launch", ROW_NORM, ("bin/late",)),
    Case("skip_last", "work skipped: each row's last column", ROW_NORM, ("bin/skip_last",)),
    Case(
        "stream_split",
        "work launched on another stream so the timer stops early",
        ROW_NORM,
        ("bin/stream_split",),
    ),
    Case("persist_l2", "a persisting-L2 carve-out left set", ROW_NORM, ("bin/persist_l2",)),
    Case(
        "profiler_aware",
        "behaviour that changes under a profiler: right when captured, one row in eight when timed",
        ROW_NORM,
        ("bin/profiler_aware",),
        timed=True,
    ),
    Case("half-signed", "precision downgraded to half", SIGNED, ("bin/half", SUMS_N, "1", "signed")),
    Case("zeroinput-signed", "input modified", SIGNED, ("bin/zeroinput", SUMS_N, "1", "signed")),
    Case("zeroinput-drift", "input modified", DRIFT, ("bin/zeroinput", SUMS_N, "1", "drift")),
    Case("droptail-signed", "work skipped: the tail", SIGNED, ("bin/droptail", SUMS_N, "1", "signed")),
    Case("skip-signed", "work skipped: every other block", SIGNED, ("bin/skip", SUMS_N, "1", "signed")),
    Case("nobarrier-signed", "a barrier dropped (a race)", SIGNED, ("bin/nobarrier", SUMS_N, "1", "signed")),
    Case("overwrite_input", "input modified", BLOCK_SUM, ("bin/overwrite_input",)),
    Case("oob_write", "writes outside its output", BLOCK_SUM, ("bin/oob_write",)),
    Case("fewer_launches", "launches skipped", BLOCK_SUM, ("bin/fewer_launches",)),
    Case("half_accum", "precision downgraded to half", BLOCK_SUM, ("bin/half_accum",)),
    Case("nosync", "a barrier dropped (a race)", BLOCK_SUM, ("bin/nosync",)),
)
CORRECT: tuple[Case, ...] = (
    Case("warp", "reordered reduction launched 10 times on one output", ROW_NORM, ("bin/warp",)),
    Case("triton-256", "Triton rewrite: another block size", ROW_NORM_TRITON, _python("row_norm.py", "256")),
    *(
        Case(f"{name}-{data.argv[-1]}", kind, data, (f"bin/{name}", SUMS_N, "1", data.argv[-1]))
        for name, kind in (
            ("tree", "reordered reduction: a tree"),
            ("shuffle", "reordered reduction: warp shuffles"),
            ("gridstride", "another launch shape: grid-stride loop"),
            ("vec4", "vectorized loads (float4)"),
        )
        for data in (SIGNED, DRIFT)
    ),
    Case("fixed_good", "reordered block reduction", BLOCK_SUM, ("bin/fixed_good",)),
)
# Reference and candidate launches timed by both the replay timer and the CUDA-event harness.
TIMED_PAIRS: tuple[tuple[str, Side, tuple[str, ...]], ...] = (
    ("warp", ROW_NORM, ("bin/warp",)),
    *((name, SIGNED, (f"bin/{name}", SUMS_N, "1", "signed")) for name in ("tree", "shuffle", "vec4")),
)
TIMING = ValidationOptions(runs=6, min_runs=4)  # as tests/accordo/test_gpu_replay.py
UNTIMED = ValidationOptions(measure=False)


@dataclass
class Tally:
    case: Case
    cheat: bool
    verdicts: Counter[str] = field(default_factory=Counter)  # "passed" or the check that failed
    failures: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)  # a reason per check that failed
    seconds: float = 0.0

    def add(self, result: ValidationResult, seconds: float) -> None:
        self.seconds += seconds
        if result.passed:
            self.verdicts["passed"] += 1
            return
        failed = next((c.name for c in result.checks if c.outcome == "failed"), "unknown")
        self.verdicts[failed] += 1
        self.failures[result.failure or "unknown"] += 1
        self.reasons.setdefault(failed, (result.reason or "")[:300])

    @property
    def judged(self) -> int:
        return sum(self.verdicts.values())

    @property
    def right(self) -> int:
        passed = self.verdicts["passed"]
        return self.judged - passed if self.cheat else passed

    def row(self) -> dict:
        return {
            "name": self.case.name,
            "kind": self.case.kind,
            "folder": self.case.folder,
            "reference": list(self.case.reference.argv),
            "candidate": list(self.case.candidate),
            "judged": self.judged,
            "right": self.right,
            "verdicts": dict(self.verdicts),
            "failures": dict(self.failures),
            "reasons": self.reasons,
            "seconds_per_judgement": round(self.seconds / self.judged, 2) if self.judged else None,
        }


def build(folders: set[str], into: Path) -> dict[str, Path]:
    built = {}
    for name in sorted(folders):
        target = into / name
        shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("bin"))
        done = subprocess.run(["make", "-j8"], cwd=target, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"integrity: building {name} failed:\n{done.stderr[-2000:]}")
        built[name] = target
    return built


def share(tallies: list[Tally]) -> float | None:
    judged = sum(t.judged for t in tallies)
    return round(sum(t.right for t in tallies) / judged, 4) if judged else None


def print_table(tallies: list[Tally]) -> None:
    print(f"{'case':<20} {'cheat':<6} {'right':>7}  caught by / verdicts")
    for tally in tallies:
        verdicts = ", ".join(f"{k} {v}" for k, v in sorted(tally.verdicts.items()))
        cheat = "yes" if tally.cheat else "no"
        print(f"{tally.case.name:<20} {cheat:<6} {tally.right:>3}/{tally.judged:<3}  {verdicts}")


def judge(case: Case, reference: Reference, cwd: Path) -> ValidationResult:
    """One judgement of ``case``: check_candidate, and for a timed case judge_timing after it passed."""
    if not case.timed:
        return check_candidate(reference, list(case.candidate), cwd=cwd, options=UNTIMED)
    with tempfile.TemporaryDirectory(prefix="integrity-timed-") as work:
        checked = check_candidate(reference, list(case.candidate), cwd=cwd, options=TIMING, workdir=work)
        if not checked.passed:
            return checked
        return judge_timing(reference, list(case.candidate), checked, cwd=cwd, options=TIMING, workdir=work)


def capture_once(side: Side, argv: tuple[str, ...], cwd: Path) -> Capture:
    run = run_capture(list(argv), kernel_regex=kernel_pattern(side.kernel), cwd=cwd, timeout_s=120)
    if run.status != "ok" or run.capture is None:
        raise SystemExit(f"integrity: capturing {' '.join(argv)} failed: {run.message}")
    return run.capture


def harness_speedup(reference: Capture, candidate: Capture, launch: int, scratch: Path, flush: int) -> float:
    """The CUDA-event harness's speedup of the candidate's launch ``launch`` over the reference's: each
    kernel loaded from the cubin its capture holds, on its capture's inputs, L2 flushed before each launch."""
    with EventHarness() as harness:
        prepared = []
        for label, capture in (("reference", reference), ("candidate", candidate)):
            chosen = timed_launch(capture, launch)
            module, shape = capture.module_of(chosen), chosen.shape
            assert module is not None and shape is not None
            cubin = scratch / f"{label}.cubin"
            cubin.write_bytes(module.image)
            kernel = harness.load(cubin, chosen.name)
            smem = kernel.static_smem + shape.dynamic_shared
            prepared.append(harness.prepare(kernel, chosen, shape.grid, shape.block, smem))
        timed = harness.speedup(prepared[0], prepared[1], rounds=10, iterations=50, flush_l2_bytes=flush)
        return timed.speedup


def replay_errors(built: dict[str, Path], scratch: Path) -> list[dict]:
    """Per pair of TIMED_PAIRS, the replay timer's and the event harness's speedup (L2 flushed)."""
    flush = 2 * Driver().l2_bytes()
    rows = []
    for name, side, argv in TIMED_PAIRS:
        cwd = built[side.folder]
        folder = scratch / f"pair-{name}"
        folder.mkdir()
        reference = write_capture(capture_once(side, side.argv, cwd), folder / "reference.bin")
        candidate = write_capture(capture_once(side, argv, cwd), folder / "candidate.bin")
        replayed = replay_speedups(reference, candidate, timeout_s=300, seconds=3.0)
        if not isinstance(replayed, ReplaySpeedups):
            raise SystemExit(f"integrity: the replay timer failed on {name}: {replayed.message}")
        captures = read_capture(reference), read_capture(candidate)
        event = harness_speedup(*captures, replayed.launch, folder, flush)
        error = abs(replayed.cold.median / event - 1)
        rows.append(
            {
                "name": name,
                "reference": list(side.argv),
                "candidate": list(argv),
                "launch": replayed.launch,
                "replay_speedup": round(replayed.cold.median, 4),
                "replay_iterations": replayed.iterations,
                "replay_reference_ns": round(replayed.cold.reference_ns, 1),
                "replay_candidate_ns": round(replayed.cold.candidate_ns, 1),
                "event_harness_speedup": round(event, 4),
                "relative_error": round(error, 4),
            }
        )
        print(
            f"integrity: {name}: replay {replayed.cold.median:.3f}x, event harness {event:.3f}x, "
            f"error {error:.1%}",
            flush=True,
        )
    return rows


def judge_round(
    tallies: list[Tally], references: dict[tuple[Side, bool], Reference], built: dict[str, Path], jobs: int
) -> None:
    """Every case judged once, ``jobs`` at a time, the timed ones first (they take longest)."""

    def one(tally: Tally) -> None:
        case = tally.case
        began = time.monotonic()
        result = judge(case, references[case.reference, case.timed], built[case.folder])
        tally.add(result, time.monotonic() - began)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, sorted(tallies, key=lambda t: not t.case.timed)))


def resume(paths: list[Path], tallies: list[Tally]) -> tuple[int, float, list[dict], str | None]:
    """The judgements, rounds and seconds of earlier runs (one device, same corpus) added to ``tallies``,
    with the first replay pairs one of them measured and their device; a later run then carries on where
    they stopped. Runs side by side on several GPUs of one host (``--no-pairs``, one per GPU) are put
    together this way."""
    rounds, seconds, pairs, device = 0, 0.0, [], None
    for path in paths:
        earlier = json.loads(path.read_text())
        device = device or earlier["device"]
        if earlier["device"] != device:
            raise SystemExit(f"integrity: {path} was measured on {earlier['device']}, the others on {device}")
        rows = {row["name"]: row for row in earlier["cases"]}
        if set(rows) != {t.case.name for t in tallies}:
            raise SystemExit(f"integrity: {path} judged another corpus")
        for tally in tallies:
            row = rows[tally.case.name]
            if row["judged"] != earlier["rounds"]:
                raise SystemExit(f"integrity: {path}: {tally.case.name} was judged {row['judged']} times")
            tally.verdicts.update(row["verdicts"])
            tally.failures.update(row["failures"])
            for check, reason in row["reasons"].items():
                tally.reasons.setdefault(check, reason)
            tally.seconds += (row["seconds_per_judgement"] or 0.0) * row["judged"]
        rounds += earlier["rounds"]
        seconds += earlier["seconds"]
        pairs = pairs or earlier["replay_pairs"]
    return rounds, seconds, pairs, device


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=20, help="rounds of judgements, at most")
    parser.add_argument("--budget-s", type=float, default=480.0, help="no round starts after this")
    parser.add_argument("--jobs", type=int, default=8, help="judgements at a time")
    parser.add_argument(
        "--resume",
        type=Path,
        action="append",
        default=[],
        help="carry on from this earlier --out (repeatable: the runs are added up; replay pairs kept)",
    )
    parser.add_argument(
        "--pairs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="measure the replay pairs when no resumed run has them (--no-pairs: a run of rounds only)",
    )
    args = parser.parse_args(argv)
    began_here = time.monotonic()
    tallies = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
    rounds, earlier_s, pairs, earlier_device = resume(args.resume, tallies)
    start = time.monotonic() - earlier_s
    if (rounds >= args.repeats or args.budget_s <= 0) and (pairs or not args.pairs):
        print(f"integrity: {rounds} rounds resumed, no more to run: adding up (no GPU needed)", flush=True)
        print_table(tallies)
        write(args.out, tallies, rounds, args.repeats, earlier_s, pairs, earlier_device or device_name())
        return 0
    device = device_name()
    if earlier_device not in (None, device):
        raise SystemExit(f"integrity: the runs resumed were measured on {earlier_device}, not on {device}")
    with tempfile.TemporaryDirectory(prefix="integrity-") as scratch:
        built = build({t.case.folder for t in tallies}, Path(scratch))
        if not pairs and args.pairs:
            pairs = replay_errors(built, Path(scratch))
        references: dict[tuple[Side, bool], Reference] = {}
        for key in dict.fromkeys((t.case.reference, t.case.timed) for t in tallies):
            side, timed = key
            print(f"integrity: capturing the reference {' '.join(side.argv)} ({side.folder})", flush=True)
            references[key] = capture_reference(
                side.kernel, list(side.argv), cwd=built[side.folder], options=TIMING if timed else UNTIMED
            )
        round_s = 0.0
        while rounds < args.repeats and time.monotonic() - began_here + round_s < args.budget_s:
            began = time.monotonic()
            judge_round(tallies, references, built, args.jobs)
            rounds += 1
            round_s = time.monotonic() - began
            print(f"integrity: round {rounds} in {round_s:.1f} s", flush=True)
            write(args.out, tallies, rounds, args.repeats, time.monotonic() - start, pairs, device)
    print_table(tallies)
    write(args.out, tallies, rounds, args.repeats, time.monotonic() - start, pairs, device)
    return 0


def write(
    out: Path, tallies: list[Tally], rounds: int, wanted: int, seconds: float, pairs: list[dict], device: str
) -> None:
    cheats = [t for t in tallies if t.cheat]
    correct = [t for t in tallies if not t.cheat]
    result = {
        "device": device,
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rounds": rounds,
        "rounds_wanted": wanted,
        "seconds": round(seconds, 1),
        "cheats": len(cheats),
        "cheats_rejected": share(cheats),
        "correct": len(correct),
        "correct_accepted": share(correct),
        "replay_speedup_error": max((p["relative_error"] for p in pairs), default=None),
        "replay_pairs": pairs,
        "cases": [t.row() for t in tallies],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())

"""Accordo against rewrites that cheat (GPU machine): is every cheat rejected, and every correct rewrite
accepted, every time?

The corpus is real programs: each a candidate against a real reference, built from examples/accordo_repeat
(a row norm launched 10 times on one output, in CUDA C++ and Triton), examples/accordo_sums (a float sum,
noisy through atomicAdd) and examples/accordo_cases (a block sum). ``CHEATS`` are rewrites of the kinds
met in public LLM kernel benchmarks; ``CORRECT`` are reordered reductions launched repeatedly, other launch
shapes, vectorized loads and a Triton rewrite. Each reference is captured once; every candidate is then
judged (``accordo.validate.check_candidate``: both comparisons and the probes) round after round, every case
once a round, until ``--repeats`` rounds or ``--budget-s`` run out, so that every case gets the same
number of judgements.

    python -m benchmarks.integrity --out benchmarks/results/integrity.json [--repeats 20] [--budget-s 420]

The results: ``cheats`` and ``cheats_rejected`` (the share of judgements that rejected a cheat; target
1.0) with, per cheat, the checks that caught it and a reason; ``correct`` and ``correct_accepted``
(target 1.0); ``rounds`` (judgements per case). The replay timer's error against the CUDA-event harness
(``replay_speedup_error``) is not measured: Accordo has no standalone replay of a captured launch yet.
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from accordo.validate import Reference, ValidationOptions, capture_reference, check_candidate
from benchmarks.common import device_name
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=20, help="rounds of judgements, at most")
    parser.add_argument("--budget-s", type=float, default=420.0, help="no round starts after this")
    args = parser.parse_args(argv)
    start = time.monotonic()
    options = ValidationOptions(measure=False)
    tallies = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
    with tempfile.TemporaryDirectory(prefix="integrity-") as scratch:
        built = build({t.case.folder for t in tallies}, Path(scratch))
        references: dict[Side, Reference] = {}
        for side in dict.fromkeys(t.case.reference for t in tallies):
            print(f"integrity: capturing the reference {' '.join(side.argv)} ({side.folder})", flush=True)
            references[side] = capture_reference(
                side.kernel, list(side.argv), cwd=built[side.folder], options=options
            )
        rounds = 0
        round_s = 0.0
        while rounds < args.repeats and time.monotonic() - start + round_s < args.budget_s:
            began = time.monotonic()
            for tally in tallies:
                case = tally.case
                t0 = time.monotonic()
                result = check_candidate(
                    references[case.reference], list(case.candidate), cwd=built[case.folder], options=options
                )
                tally.add(result, time.monotonic() - t0)
            rounds += 1
            round_s = time.monotonic() - began
            print(f"integrity: round {rounds} in {round_s:.1f} s", flush=True)
            write(args.out, tallies, rounds, args.repeats, time.monotonic() - start)
    print_table(tallies)
    write(args.out, tallies, rounds, args.repeats, time.monotonic() - start)
    return 0


def write(out: Path, tallies: list[Tally], rounds: int, wanted: int, seconds: float) -> None:
    cheats = [t for t in tallies if t.cheat]
    correct = [t for t in tallies if not t.cheat]
    result = {
        "device": device_name(),
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "rounds": rounds,
        "rounds_wanted": wanted,
        "seconds": round(seconds, 1),
        "cheats": len(cheats),
        "cheats_rejected": share(cheats),
        "correct": len(correct),
        "correct_accepted": share(correct),
        "replay_speedup_error": None,
        "not_measured": {"replay_speedup_error": "Accordo has no standalone replay of a captured launch yet"},
        "cases": [t.row() for t in tallies],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())

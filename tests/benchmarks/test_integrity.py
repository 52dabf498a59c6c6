"""benchmarks/integrity.py on the CPU: the corpus names programs that exist, holds at least 10 cheats and 8
correct rewrites, and a judgement counts as right only when it rejects a cheat or accepts a correct one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.integrity import CHEATS, CORRECT, EXAMPLES, Tally, main, resume, share, write
from intelliperf.contract.report import JudgeCheck, ValidationResult

DEVICE = "NVIDIA H100 80GB HBM3"


def built_programs(folder: str) -> set[str]:
    makefile = (EXAMPLES / folder / "Makefile").read_text().replace("\\\n", " ")
    match = re.search(r"^CASES := (.+)$", makefile, re.MULTILINE)
    assert match, f"{folder}/Makefile has no CASES line"
    return {f"bin/{name}" for name in match.group(1).split()}


@pytest.mark.parametrize("case", [*CHEATS, *CORRECT], ids=lambda c: c.name)
def test_every_case_runs_programs_its_folder_builds(case) -> None:
    programs = built_programs(case.folder)
    for argv in (case.reference.argv, case.candidate):
        program = next(arg for arg in argv if arg.startswith("bin/") or arg.endswith(".py"))
        assert program in programs or (EXAMPLES / case.folder / program).is_file(), (case.name, program)


def test_the_corpus_has_ten_cheats_and_eight_correct_rewrites_with_unique_names() -> None:
    assert len(CHEATS) >= 10 and len(CORRECT) >= 8
    names = [c.name for c in (*CHEATS, *CORRECT)]
    assert len(names) == len(set(names))
    assert {c.candidate for c in CHEATS}.isdisjoint({c.candidate for c in CORRECT})
    assert any(c.candidate[0].endswith("python3") or "row_norm.py" in c.candidate for c in CORRECT)


def verdict(passed: bool, failed_check: str | None = None, failure: str | None = None) -> ValidationResult:
    checks = [JudgeCheck(name="end_to_end", outcome="passed")]
    if failed_check:
        checks.append(JudgeCheck(name=failed_check, outcome="failed", detail="why"))  # type: ignore[arg-type]
    return ValidationResult(
        kernel="k", passed=passed, failure=failure, reason="why" if failure else None, checks=checks
    )


def test_a_judgement_is_right_when_it_rejects_a_cheat_or_accepts_a_correct_rewrite() -> None:
    cheat, correct = Tally(CHEATS[0], True), Tally(CORRECT[0], False)
    cheat.add(verdict(False, "prefilled_nan", "mismatch"), 1.0)
    cheat.add(verdict(True), 1.0)  # a cheat that got through
    correct.add(verdict(True), 2.0)
    correct.add(verdict(False, "fresh_inputs", "mismatch"), 2.0)  # a correct rewrite rejected
    correct.add(verdict(True), 2.0)
    assert (cheat.right, cheat.judged) == (1, 2)
    assert (correct.right, correct.judged) == (2, 3)
    assert cheat.row()["verdicts"] == {"prefilled_nan": 1, "passed": 1}
    assert cheat.row()["reasons"] == {"prefilled_nan": "why"}
    assert share([cheat]) == 0.5 and share([cheat, correct]) == 0.6


def test_nothing_judged_is_no_share_not_zero(tmp_path: Path) -> None:
    tallies = [Tally(CHEATS[0], True), Tally(CORRECT[0], False)]
    assert share(tallies) is None
    out = tmp_path / "integrity.json"
    write(out, tallies, 0, 20, 1.0, [], DEVICE)
    result = json.loads(out.read_text())
    assert result["cheats_rejected"] is None and result["correct_accepted"] is None
    assert result["replay_speedup_error"] is None and result["replay_pairs"] == []
    assert (result["cheats"], result["correct"]) == (1, 1)


def test_the_replay_error_is_the_worst_pairs(tmp_path: Path) -> None:
    pairs = [{"name": "a", "relative_error": 0.004}, {"name": "b", "relative_error": 0.031}]
    out = tmp_path / "integrity.json"
    write(out, [Tally(CHEATS[0], True)], 1, 20, 1.0, pairs, DEVICE)
    assert json.loads(out.read_text())["replay_speedup_error"] == 0.031


def test_timed_cases_are_the_cheats_only_timing_can_catch() -> None:
    """profiler_aware is right on every buffer it is judged on: without judge_timing it would pass."""
    assert [c.name for c in (*CHEATS, *CORRECT) if c.timed] == ["profiler_aware"]
    assert {"stream_split", "persist_l2", "profiler_aware"} <= {c.name for c in CHEATS}


def test_a_resumed_run_carries_on_every_count_of_the_earlier_one(tmp_path: Path) -> None:
    earlier = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
    for tally in earlier:
        tally.add(verdict(False, "isolated", "mismatch") if tally.cheat else verdict(True), 1.5)
        tally.add(verdict(False, "fresh_inputs", "mismatch"), 2.5)
    out = tmp_path / "integrity.json"
    pairs = [{"name": "warp", "relative_error": 0.01}]
    write(out, earlier, 2, 20, 99.0, pairs, DEVICE)
    later = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
    assert resume([out], later) == (2, 99.0, pairs, DEVICE)
    for before, after in zip(earlier, later, strict=True):
        assert (after.verdicts, after.failures, after.reasons) == (
            before.verdicts,
            before.failures,
            before.reasons,
        )
        assert after.seconds == pytest.approx(4.0)
    assert share(later) == share(earlier)


def test_resuming_refuses_a_partial_round_runs_of_two_devices_or_more_rounds_on_another(
    tmp_path: Path,
) -> None:
    tallies = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
    partial = tmp_path / "partial.json"
    tallies[0].add(verdict(False, "isolated", "mismatch"), 1.0)
    write(partial, tallies, 1, 20, 1.0, [], DEVICE)
    with pytest.raises(SystemExit, match="was judged 0 times"):
        resume([partial], [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT])
    for tally in tallies[1:]:
        tally.add(verdict(True), 1.0)
    h100, z9 = tmp_path / "h100.json", tmp_path / "z9.json"
    write(h100, tallies, 1, 20, 1.0, [], DEVICE)
    write(z9, tallies, 1, 20, 1.0, [], "NVIDIA Z9")
    with pytest.raises(SystemExit, match=r"z9\.json was measured on NVIDIA Z9, the others on NVIDIA H100"):
        resume([h100, z9], [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT])
    # one more round wanted: it would run here, on no GPU of that name (refused before building anything)
    with pytest.raises(SystemExit, match="measured on NVIDIA H100 80GB HBM3, not on unknown"):
        main(["--out", str(tmp_path / "out.json"), "--repeats", "2", "--resume", str(h100)])
    assert not (tmp_path / "out.json").exists()


def test_runs_side_by_side_add_up_and_keep_the_first_pairs_measured(tmp_path: Path) -> None:
    """One run per GPU (--no-pairs) and an earlier run with the replay pairs: resumed together, every
    count is the sum, and a cheat that one GPU's run let pass is not lost among the others' rejections."""
    pairs = [{"name": "warp", "relative_error": 0.0125}]
    runs = []
    for index, (rounds, seconds, run_pairs) in enumerate([(3, 150.0, pairs), (5, 250.0, []), (4, 200.0, [])]):
        tallies = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
        for _ in range(rounds):
            for tally in tallies:
                tally.add(verdict(False, "isolated", "mismatch") if tally.cheat else verdict(True), 2.0)
        if index == 2:
            tallies[0].verdicts["isolated"] -= 1
            tallies[0].verdicts["passed"] += 1
        runs.append(tmp_path / f"run{index}.json")
        write(runs[-1], tallies, rounds, 20, seconds, run_pairs, DEVICE)
    later = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
    assert resume(runs[1:] + runs[:1], later) == (12, 600.0, pairs, DEVICE)
    assert all(t.judged == 12 for t in later)
    assert later[0].right == 11 and share([t for t in later if t.cheat]) < 1.0
    assert share([t for t in later if not t.cheat]) == 1.0
    assert later[0].seconds == pytest.approx(24.0)


def test_a_run_that_has_its_rounds_already_only_adds_up(tmp_path: Path) -> None:
    tallies = [Tally(c, True) for c in CHEATS] + [Tally(c, False) for c in CORRECT]
    for tally in tallies:
        tally.add(verdict(False, "isolated", "mismatch") if tally.cheat else verdict(True), 1.0)
    first, second, out = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "out.json"
    write(first, tallies, 1, 20, 10.0, [{"name": "warp", "relative_error": 0.01}], DEVICE)
    write(second, tallies, 1, 20, 12.0, [], DEVICE)
    assert main(["--out", str(out), "--repeats", "2", "--resume", str(first), "--resume", str(second)]) == 0
    result = json.loads(out.read_text())
    assert (result["rounds"], result["seconds"], result["replay_speedup_error"]) == (2, 22.0, 0.01)
    assert result["device"] == DEVICE  # the runs' device: adding them up needs no GPU
    short = tmp_path / "short.json"
    resumed = ["--resume", str(first), "--resume", str(second)]
    assert main(["--out", str(short), "--budget-s", "0", *resumed]) == 0  # 2 of the 20 rounds wanted
    added = json.loads(short.read_text())
    assert (added["rounds"], added["rounds_wanted"]) == (2, 20)
    assert result["cheats_rejected"] == 1.0 and result["correct_accepted"] == 1.0

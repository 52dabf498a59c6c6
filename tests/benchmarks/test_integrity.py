"""benchmarks/integrity.py on the CPU: the corpus names programs that exist, holds at least 10 cheats and 8
correct rewrites, and a judgement counts as right only when it rejects a cheat or accepts a correct one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.integrity import CHEATS, CORRECT, EXAMPLES, Tally, share, write
from intelliperf.contract.report import JudgeCheck, ValidationResult


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
    write(out, tallies, 0, 20, 1.0)
    result = json.loads(out.read_text())
    assert result["cheats_rejected"] is None and result["correct_accepted"] is None
    assert result["replay_speedup_error"] is None and "replay_speedup_error" in result["not_measured"]
    assert (result["cheats"], result["correct"]) == (1, 1)

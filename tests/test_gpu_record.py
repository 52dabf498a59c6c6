"""benchmarks/gpu_record.py on the CPU: the summary parser, the files hash, merging parts, `check`, and the
project's own record, which CI requires to match this checkout (GPU code lands only after its GPU tests
passed on a GPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gpu_record import RECORD, ROOT, files_hash, merge_records, parse_summary

SCRIPT = ROOT / "benchmarks" / "gpu_record.py"
REFRESH = (
    "on a GPU machine: python benchmarks/gpu_record.py run --out $OUT/gpu_part1.json --commit <sha> "
    "-- <tests> (in parts if need be), then locally: python benchmarks/gpu_record.py merge <parts> "
    "--out benchmarks/results/gpu_tests.json"
)


# --- parse_summary ----------------------------------------------------------------------------------------


def test_parse_summary_quiet_line() -> None:
    result = parse_summary("....\n26 passed in 69.40s (0:01:09)\n")
    assert (result["passed"], result["failed"], result["skipped"], result["errors"]) == (26, 0, 0, 0)
    assert result["seconds"] == 69.40
    assert result["summary"] == "26 passed in 69.40s (0:01:09)"


def test_parse_summary_failures_and_passes() -> None:
    result = parse_summary(
        "FAILED tests/test_x.py::test_a - assert 1 == 2\n5 failed, 50 passed in 300.1s (0:05:00)"
    )
    assert (result["passed"], result["failed"]) == (50, 5)
    assert result["seconds"] == 300.1


def test_parse_summary_every_kind() -> None:
    line = "1 failed, 7 passed, 3 skipped, 12 deselected, 1 xfailed, 1 xpassed, 4 warnings, 2 errors in 9.87s"
    result = parse_summary(f"SKIPPED [3] tests/accordo/test_gpu_native.py:10: needs nvcc\n{line}\n")
    expected = {
        "failed": 1,
        "passed": 7,
        "skipped": 3,
        "deselected": 12,
        "xfailed": 1,
        "xpassed": 1,
        "warnings": 4,
        "errors": 2,
    }
    assert {key: result[key] for key in expected} == expected


def test_parse_summary_singular_words_and_padding() -> None:
    line = "= 3 failed, 50 passed, 2 skipped, 1 error, 1 warning in 69.40s (0:01:09) ="
    text = f"==== short test summary info ====\n{line}\n"
    result = parse_summary(text)
    counts = {key: result[key] for key in ("failed", "passed", "skipped", "errors", "warnings")}
    assert counts == {"failed": 3, "passed": 50, "skipped": 2, "errors": 1, "warnings": 1}


def test_parse_summary_long_padding_and_colour() -> None:
    text = "\x1b[32m============ 26 passed, 1 deselected in 1.50s ============\x1b[0m\n"
    result = parse_summary(text)
    assert (result["passed"], result["deselected"], result["seconds"]) == (26, 1, 1.5)
    assert result["summary"] == "============ 26 passed, 1 deselected in 1.50s ============"


def test_parse_summary_takes_the_last_line_and_knows_no_tests() -> None:
    assert parse_summary("3 passed in 1.00s\nno tests ran in 0.01s\n")["passed"] == 0
    assert parse_summary("2 passed in 1.00s\nsomething after\n")["passed"] == 2


def test_parse_summary_without_a_summary_raises() -> None:
    with pytest.raises(ValueError, match="no pytest summary"):
        parse_summary("Traceback (most recent call last):\nKeyboardInterrupt\n")


# --- files_hash -------------------------------------------------------------------------------------------

HASHED_TREE = {
    "accordo/__init__.py": "x = 1\n",
    "accordo/native/capture.cpp": "int main() { return 0; }\n",
    "accordo/native/Makefile": "all:\n",
    "intelliperf/gpu/ncu.py": "NCU = 'ncu'\n",
    "intelliperf/engine/judge.py": "def judge(): ...\n",
    "tests/accordo/test_gpu_native.py": "def test(): ...\n",
    "tests/accordo/sample_app.cu": "__global__ void k() {}\n",
    "examples/accordo_cases/ref.cu": "__global__ void block_sum() {}\n",
    "benchmarks/gpu_record.py": "# the script\n",
}
UNHASHED_TREE = {
    "README.md": "# readme\n",
    "intelliperf/engine/optimize.py": "def optimize(): ...\n",
    "tests/test_cli.py": "def test(): ...\n",
    "examples/accordo_cases/bin/ref": "\x7fELF",
    "accordo/__pycache__/compare.cpython-311.pyc": "bytecode",
    "accordo/native/libaccordo.so": "\x7fELF",
}


def write_tree(root: Path, tree: dict[str, str], order: list[str] | None = None) -> None:
    for rel in order or list(tree):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tree[rel])


def test_files_hash_lists_only_the_hashed_files(tmp_path: Path) -> None:
    write_tree(tmp_path, {**HASHED_TREE, **UNHASHED_TREE})
    _, files = files_hash(tmp_path)
    assert files == sorted(HASHED_TREE)


def test_files_hash_does_not_depend_on_creation_order_or_modes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write_tree(first, HASHED_TREE)
    write_tree(second, HASHED_TREE, order=list(reversed(HASHED_TREE)))
    (second / "accordo/__init__.py").chmod(0o755)
    assert files_hash(first) == files_hash(second)


def test_files_hash_changes_with_one_hashed_byte(tmp_path: Path) -> None:
    write_tree(tmp_path, HASHED_TREE)
    before, _ = files_hash(tmp_path)
    (tmp_path / "tests/accordo/sample_app.cu").write_text("__global__ void k() {}\r")
    assert files_hash(tmp_path)[0] != before


def test_files_hash_changes_when_a_hashed_file_is_added(tmp_path: Path) -> None:
    write_tree(tmp_path, HASHED_TREE)
    before, _ = files_hash(tmp_path)
    write_tree(tmp_path, {"examples/accordo_sums/sum.cu": "__global__ void s() {}\n"})
    after, files = files_hash(tmp_path)
    assert after != before
    assert "examples/accordo_sums/sum.cu" in files


def test_files_hash_ignores_unrelated_files_and_build_outputs(tmp_path: Path) -> None:
    write_tree(tmp_path, HASHED_TREE)
    before = files_hash(tmp_path)
    write_tree(tmp_path, UNHASHED_TREE)
    assert files_hash(tmp_path) == before
    (tmp_path / "README.md").write_text("# changed\n")
    (tmp_path / "examples/accordo_cases/bin/ref").write_text("rebuilt")
    assert files_hash(tmp_path) == before


def test_files_hash_separates_path_from_content(tmp_path: Path) -> None:
    """Moving bytes between the name and the content of a file must change the hash."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_tree(first, {"accordo/ab.py": "c"})
    write_tree(second, {"accordo/a.py": "bc"})
    assert files_hash(first)[0] != files_hash(second)[0]


# --- merge_records ----------------------------------------------------------------------------------------


def part(summary: str, args: list[str], files_hash: str = "abc", commit: str | None = "c0ffee") -> dict:
    counts = parse_summary(summary)
    pytest_ = {key: counts[key] for key in ("passed", "failed", "skipped", "errors")}
    pytest_.update(summary=summary, args=args, seconds=counts["seconds"])
    return {
        "device": "NVIDIA H100 80GB HBM3",
        "commit": commit,
        "files_hash": files_hash,
        "files": ["accordo/__init__.py"],
        "pytest": pytest_,
        "recorded_at": "2025-01-01T00:00:00+00:00",
    }


def test_merge_records_sums_counts_and_keeps_each_part() -> None:
    merged = merge_records(
        [
            part("20 passed, 1 skipped in 100.00s (0:01:40)", ["tests/accordo"]),
            part("6 passed in 50.50s", ["tests/test_gpu_loop.py"], commit=None),
        ]
    )
    counts = merged["pytest"]
    assert (counts["passed"], counts["failed"], counts["skipped"], counts["errors"]) == (26, 0, 1, 0)
    assert counts["seconds"] == 150.5
    assert [p["summary"] for p in counts["parts"]] == [
        "20 passed, 1 skipped in 100.00s (0:01:40)",
        "6 passed in 50.50s",
    ]
    assert [p["args"] for p in counts["parts"]] == [["tests/accordo"], ["tests/test_gpu_loop.py"]]
    assert merged["commit"] == "c0ffee"
    assert merged["files_hash"] == "abc"
    # a merged record merges again without losing its parts
    again = merge_records([merged, part("1 failed in 1.00s", ["tests/test_gpu_worker.py"])])
    assert (again["pytest"]["passed"], again["pytest"]["failed"], len(again["pytest"]["parts"])) == (26, 1, 3)


def test_merge_records_refuses_different_files_hash() -> None:
    parts = [part("1 passed in 1.00s", []), part("1 passed in 1.00s", [], files_hash="def")]
    with pytest.raises(ValueError, match="files_hash") as err:
        merge_records(parts, ["gpu_part1.json", "gpu_part2.json"])
    assert "gpu_part1.json" in str(err.value) and "gpu_part2.json" in str(err.value)


def test_merge_records_refuses_different_commits() -> None:
    with pytest.raises(ValueError, match="different commits"):
        merge_records([part("1 passed in 1.00s", []), part("1 passed in 1.00s", [], commit="beef")])


def test_merge_cli_exits_2_on_parts_that_do_not_belong_together(tmp_path: Path) -> None:
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_text(json.dumps(part("1 passed in 1.00s", [])))
    two.write_text(json.dumps(part("1 passed in 1.00s", [], files_hash="def")))
    out = tmp_path / "merged.json"
    done = run_script("merge", str(one), str(two), "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "one.json" in done.stderr and "two.json" in done.stderr
    assert not out.exists()


# --- check ------------------------------------------------------------------------------------------------


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def checked(tmp_path: Path, record: dict) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "gpu_tests.json"
    path.write_text(json.dumps(record))
    return run_script("check", "--record", str(path))


def test_check_passes_a_matching_passing_record(tmp_path: Path) -> None:
    digest, files = files_hash(ROOT)
    done = checked(tmp_path, {**part("26 passed in 69.40s (0:01:09)", [], files_hash=digest), "files": files})
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_fails_a_stale_record(tmp_path: Path) -> None:
    digest, files = files_hash(ROOT)
    done = checked(tmp_path, {**part("26 passed in 69.40s", [], files_hash="0" * 64), "files": files})
    assert done.returncode == 1
    assert digest in done.stdout and "0" * 64 in done.stdout


def test_check_fails_a_record_with_failures(tmp_path: Path) -> None:
    digest, files = files_hash(ROOT)
    done = checked(tmp_path, {**part("1 failed, 25 passed in 69.40s", [], files_hash=digest), "files": files})
    assert done.returncode == 1
    assert "failures or errors" in done.stdout


def test_check_fails_a_record_with_no_passed_test(tmp_path: Path) -> None:
    digest, files = files_hash(ROOT)
    done = checked(tmp_path, {**part("26 skipped in 1.00s", [], files_hash=digest), "files": files})
    assert done.returncode == 1
    assert "no passed test" in done.stdout


def test_check_fails_without_a_record(tmp_path: Path) -> None:
    done = run_script("check", "--record", str(tmp_path / "missing.json"))
    assert done.returncode == 1


# --- the project's own record -----------------------------------------------------------------------------


def test_the_gpu_record_matches_this_checkout() -> None:
    """The GPU tests passed on a GPU for exactly the GPU code in this checkout (benchmarks/gpu_record.py)."""
    digest, files = files_hash(ROOT)
    if not RECORD.exists():
        pytest.fail(
            f"{RECORD.relative_to(ROOT)} does not exist: the GPU tests must be run on the device with "
            f"benchmarks/gpu_record.py and the record committed. {REFRESH}",
            pytrace=False,
        )
    record = json.loads(RECORD.read_text())
    assert record["files_hash"] == digest, (
        f"the GPU record is stale: one or more of the {len(files)} hashed files (benchmarks/gpu_record.py "
        f"HASHED) changed since the GPU tests ran; which one is not knowable from a hash. "
        f"record {record['files_hash']} != this checkout {digest}. Refresh it: {REFRESH}"
    )
    counts = record["pytest"]
    assert counts["failed"] == 0 and counts["errors"] == 0, (
        f"the GPU record shows failures: {counts['summary']}"
    )
    assert counts["passed"] > 0, f"the GPU record shows no passed test: {counts['summary']}"

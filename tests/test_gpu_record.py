"""benchmarks/gpu_record.py on the CPU: the summary parser, each part's hash, the parts' layout, merging,
`check` and `stale`, and the project's own record, which CI requires to match this checkout part by part
(GPU code lands only after its GPU tests passed on a GPU)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu_record import (
    FORMAT,
    PARTS,
    RECORD,
    ROOT,
    Part,
    covered_files,
    layout_problems,
    merge_parts,
    parse_summary,
    part_args,
    part_hash,
    plan_gpus,
    python_closure,
    record_problems,
    stale_parts,
)

SCRIPT = ROOT / "benchmarks" / "gpu_record.py"
REFRESH = (
    "on a GPU machine: scripts/device-gpu-record <commit> (runs the stale parts), then locally: "
    "python -m benchmarks.gpu_record merge gpu_part_*.json"
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
    assert result["summary"] == "26 passed, 1 deselected in 1.50s"


def test_parse_summary_takes_the_last_line_and_knows_no_tests() -> None:
    assert parse_summary("3 passed in 1.00s\nno tests ran in 0.01s\n")["passed"] == 0
    assert parse_summary("2 passed in 1.00s\nsomething after\n")["passed"] == 2


def test_parse_summary_without_a_summary_raises() -> None:
    with pytest.raises(ValueError, match="no pytest summary"):
        parse_summary("Traceback (most recent call last):\nKeyboardInterrupt\n")


# --- a part's files and hash ------------------------------------------------------------------------------

TREE = {
    "tests/conftest.py": "# markers\n",
    "accordo/__init__.py": "x = 1\n",
    "profiler/native/capture.cpp": "int main() { return 0; }\n",
    "tests/test_gpu_a.py": "import pytest\npytestmark = pytest.mark.gpu\n",
    "tests/test_gpu_b.py": "import pytest\n@pytest.mark.gpu\ndef test(): ...\n",
    "tests/test_cpu.py": "def test(): ...\n",
    "examples/a/a.cu": "__global__ void a() {}\n",
    "examples/b/b.cu": "__global__ void b() {}\n",
    "README.md": "# readme\n",
}
BUILD_OUTPUTS = {
    "examples/a/bin/a": "\x7fELF",
    "examples/a/report.json": "{}",
    "accordo/__pycache__/x.cpython-311.pyc": "bytecode",
    "profiler/native/libintelliperf_profiler.so": "\x7fELF",
    "profiler/native/capture.o": "obj",
}
PART_A = Part("a", ("tests/test_gpu_a.py",), ("accordo/**/*.py", "profiler/native/*", "examples/a/*"))
PART_B = Part("b", ("tests/test_gpu_b.py",), ("examples/b/*",))
TWO_PARTS = (PART_A, PART_B)


def write_tree(root: Path, tree: dict[str, str], order: list[str] | None = None) -> None:
    for rel in order or list(tree):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(tree[rel])


def test_a_part_covers_its_tests_what_they_drive_and_the_common_files_only(tmp_path: Path) -> None:
    write_tree(tmp_path, {**TREE, **BUILD_OUTPUTS})
    assert covered_files(tmp_path, PART_A) == [
        "accordo/__init__.py",
        "examples/a/a.cu",
        "profiler/native/capture.cpp",
        "tests/conftest.py",
        "tests/test_gpu_a.py",
    ]
    assert covered_files(tmp_path, PART_B) == ["examples/b/b.cu", "tests/conftest.py", "tests/test_gpu_b.py"]


IMPORTS = {
    "tests/conftest.py": "# markers\n",
    "tests/sub/conftest.py": "from tests.support import helpers\n",
    "tests/support/__init__.py": "",
    "tests/support/helpers.py": "import json\n",
    "tests/sub/test_gpu_c.py": (
        "import pytest\nimport subprocess, sys\npytestmark = pytest.mark.gpu\n"
        "def test():\n    from intelliperf.engine import judge\n"
        "    subprocess.run([sys.executable, '-m', 'accordo.replay', 'x'])\n"
    ),
    "intelliperf/__init__.py": "",
    "intelliperf/engine/__init__.py": "",
    "intelliperf/engine/judge.py": "from . import candidate\nfrom ..contract import report\n",
    "intelliperf/engine/candidate.py": "import numpy\n",
    "intelliperf/engine/unused.py": "x = 1\n",
    "intelliperf/contract/__init__.py": "",
    "intelliperf/contract/report.py": "def f():\n    import formulas.base\n",
    "intelliperf/cli.py": "def serve():\n    import service.cli\n",
    "formulas/__init__.py": "",
    "formulas/base.py": "",
    "accordo/__init__.py": "",
    "accordo/replay/__init__.py": "",
    "accordo/replay/__main__.py": "from accordo.replay import run\n",
    "accordo/replay/run.py": "",
    "service/__init__.py": "",
    "service/cli.py": "",
}


def test_a_part_covers_every_python_file_its_tests_reach_by_import_or_dash_m(tmp_path: Path) -> None:
    """Lazy imports, relative ones, a module run with -m (its __main__), the conftest.py files pytest
    loads; not the standard library, third-party packages or a file nothing imports."""
    write_tree(tmp_path, IMPORTS)
    part = Part("c", ("tests/sub/test_gpu_c.py",), ())
    assert covered_files(tmp_path, part) == [
        "accordo/__init__.py",
        "accordo/replay/__init__.py",
        "accordo/replay/__main__.py",
        "accordo/replay/run.py",
        "formulas/__init__.py",
        "formulas/base.py",
        "intelliperf/__init__.py",
        "intelliperf/contract/__init__.py",
        "intelliperf/contract/report.py",
        "intelliperf/engine/__init__.py",
        "intelliperf/engine/candidate.py",
        "intelliperf/engine/judge.py",
        "tests/conftest.py",
        "tests/sub/conftest.py",
        "tests/sub/test_gpu_c.py",
        "tests/support/__init__.py",
        "tests/support/helpers.py",
    ]
    before, _ = part_hash(tmp_path, part)
    (tmp_path / "formulas/base.py").write_text("THRESHOLD = 0.2\n")  # two imports away, lazily
    assert part_hash(tmp_path, part)[0] != before


def test_the_engines_cli_does_not_bring_in_the_service_it_loads_for_serve(tmp_path: Path) -> None:
    spawn = "import subprocess\nsubprocess.run(['-m', 'intelliperf'])\n"
    main = "from intelliperf import cli\n"
    write_tree(tmp_path, {**IMPORTS, "tests/test_gpu_d.py": spawn, "intelliperf/__main__.py": main})
    reached = python_closure(tmp_path, ["tests/test_gpu_d.py"])
    assert "intelliperf/cli.py" in reached and "service/cli.py" not in reached


def test_part_hash_does_not_depend_on_creation_order_or_modes(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    write_tree(first, TREE)
    write_tree(second, TREE, order=list(reversed(TREE)))
    (second / "accordo/__init__.py").chmod(0o755)
    assert part_hash(first, PART_A) == part_hash(second, PART_A)


def test_part_hash_changes_with_one_byte_a_new_file_or_the_parts_definition(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    before, _ = part_hash(tmp_path, PART_A)
    (tmp_path / "examples/a/a.cu").write_text("__global__ void a() {}\r")
    changed, _ = part_hash(tmp_path, PART_A)
    assert changed != before
    write_tree(tmp_path, {"profiler/native/restore.cpp": "// new\n"})
    added, files = part_hash(tmp_path, PART_A)
    assert added != changed and "profiler/native/restore.cpp" in files
    assert part_hash(tmp_path, Part("a", PART_A.tests, PART_A.drives[:2]))[0] != added


def test_part_hash_ignores_build_outputs_and_other_parts_files(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    before = part_hash(tmp_path, PART_A)
    write_tree(tmp_path, BUILD_OUTPUTS)
    (tmp_path / "README.md").write_text("# changed\n")
    (tmp_path / "examples/b/b.cu").write_text("// changed\n")
    assert part_hash(tmp_path, PART_A) == before


def test_part_hash_separates_path_from_content(tmp_path: Path) -> None:
    """Moving bytes between the name and the content of a file must change the hash."""
    first, second = tmp_path / "a", tmp_path / "b"
    write_tree(first, {"accordo/ab.py": "c"})
    write_tree(second, {"accordo/a.py": "bc"})
    assert part_hash(first, PART_A)[0] != part_hash(second, PART_A)[0]


# --- the parts' layout ------------------------------------------------------------------------------------


def test_every_gpu_test_file_of_this_checkout_is_in_exactly_one_part() -> None:
    assert layout_problems(ROOT) == []


def test_a_gpu_test_file_in_no_part_is_a_problem(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    assert layout_problems(tmp_path, TWO_PARTS) == []
    problems = layout_problems(tmp_path, (PART_A,))
    assert problems == [
        "tests/test_gpu_b.py has GPU tests but is in no part of benchmarks/gpu_record.py PARTS"
    ]


def test_a_gpu_mark_in_a_string_is_not_a_gpu_test(tmp_path: Path) -> None:
    write_tree(tmp_path, {**TREE, "tests/test_text.py": 'TEXT = "pytestmark = pytest.mark.gpu"\n'})
    assert layout_problems(tmp_path, TWO_PARTS) == []


def test_a_test_file_in_two_parts_or_missing_is_a_problem(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    twice = Part("c", ("tests/test_gpu_b.py", "tests/test_gpu_gone.py"), ())
    problems = layout_problems(tmp_path, (*TWO_PARTS, twice))
    assert "tests/test_gpu_b.py is in more than one part: b, c" in problems
    assert "part c: its test file tests/test_gpu_gone.py does not exist" in problems


def test_a_part_runs_every_gpu_test_of_its_files_and_only_gpu_tests() -> None:
    for part in PARTS:
        assert part_args(part) == ["-m", "gpu", *part.tests]
        assert not any(arg.startswith("-") or "::" in arg for arg in part.tests), part


# --- a record of parts: check, stale, merge ---------------------------------------------------------------


def entry(root: Path, part: Part, summary: str = "3 passed in 10.00s", **changes: object) -> dict:
    digest, files = part_hash(root, part)
    counts = parse_summary(summary)
    pytest_ = {key: counts[key] for key in ("passed", "failed", "skipped", "errors", "deselected")}
    pytest_.update(summary=summary, seconds=counts["seconds"])
    made = {
        "part": part.name,
        "args": part_args(part),
        "files_hash": digest,
        "files": files,
        "device": "NVIDIA H100 80GB HBM3",
        "commit": "c0ffee",
        "pytest": pytest_,
        "recorded_at": "2026-11-27T00:00:00+00:00",
    }
    return {**made, **changes}


def record_of(*entries: dict) -> dict:
    return {"format": FORMAT, "parts": {e["part"]: e for e in entries}}


def test_a_record_of_passing_parts_at_this_tree_holds(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    record = record_of(entry(tmp_path, PART_A), entry(tmp_path, PART_B))
    assert record_problems(record, tmp_path, TWO_PARTS) == []
    assert stale_parts(record, tmp_path, TWO_PARTS) == []


def test_a_change_to_one_parts_file_makes_only_that_part_stale(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    record = record_of(entry(tmp_path, PART_A), entry(tmp_path, PART_B))
    (tmp_path / "examples/b/b.cu").write_text("__global__ void b(int) {}\n")
    assert stale_parts(record, tmp_path, TWO_PARTS) == ["b"]
    assert [p.split(":")[0] for p in record_problems(record, tmp_path, TWO_PARTS)] == ["part b"]
    (tmp_path / "tests/conftest.py").write_text("# markers changed\n")
    assert stale_parts(record, tmp_path, TWO_PARTS) == ["a", "b"]


def test_a_change_to_one_test_file_of_this_checkout_stales_only_its_part(tmp_path: Path) -> None:
    """On the real parts: a copy of what they cover, one test file changed."""
    files = {rel for part in PARTS for rel in covered_files(ROOT, part)}
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes((ROOT / rel).read_bytes())
    record = record_of(*(entry(tmp_path, part) for part in PARTS))
    assert stale_parts(record, tmp_path) == []
    for part in PARTS:
        test = tmp_path / part.tests[0]
        original = test.read_bytes()
        test.write_bytes(original + b"\n")
        assert stale_parts(record, tmp_path) == [part.name]
        test.write_bytes(original)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"args": ["-m", "gpu", "tests/test_gpu_a.py", "-k", "not slow"]}, "run with"),
        ({"summary": "1 failed, 2 passed in 10.00s"}, "failures or errors"),
        ({"summary": "1 error, 2 passed in 10.00s"}, "failures or errors"),
        ({"summary": "no tests ran in 1.00s"}, "no passed test"),
        ({"summary": "2 passed, 1 skipped in 10.00s"}, "skipped GPU tests"),
        ({"files_hash": "0" * 64}, "stale"),
    ],
)
def test_a_part_that_did_not_pass_all_its_own_gpu_tests_fails_the_check(
    tmp_path: Path, changes: dict, problem: str
) -> None:
    write_tree(tmp_path, TREE)
    summary = str(changes.pop("summary", "3 passed in 10.00s"))
    record = record_of(entry(tmp_path, PART_A, summary, **changes), entry(tmp_path, PART_B))
    problems = record_problems(record, tmp_path, TWO_PARTS)
    assert len(problems) == 1 and problems[0].startswith("part a:") and problem in problems[0], problems
    assert stale_parts(record, tmp_path, TWO_PARTS) == ["a"]


def test_a_missing_an_unknown_or_an_old_format_record_fails_the_check(tmp_path: Path) -> None:
    write_tree(tmp_path, TREE)
    assert record_problems(record_of(entry(tmp_path, PART_A)), tmp_path, TWO_PARTS) == [
        "part b: not in the record"
    ]
    extra = record_of(
        entry(tmp_path, PART_A), entry(tmp_path, PART_B), {**entry(tmp_path, PART_B), "part": "z"}
    )
    assert record_problems(extra, tmp_path, TWO_PARTS) == ["part z: in the record but not in PARTS"]
    old = {"files_hash": "abc", "pytest": {"passed": 135}}
    assert f"not in format {FORMAT}" in record_problems(old, tmp_path, TWO_PARTS)[0]
    assert stale_parts(old, tmp_path, TWO_PARTS) == ["a", "b"]


def test_merge_replaces_only_the_parts_given() -> None:
    old = {**entry(ROOT, PARTS[1]), "commit": "0ld"}
    record = record_of(entry(ROOT, PARTS[0]), old)
    fresh = {**entry(ROOT, PARTS[0]), "commit": "new"}
    merged = merge_parts(record, [fresh], ROOT)
    assert merged["parts"][PARTS[0].name]["commit"] == "new"
    assert merged["parts"][PARTS[1].name] == old
    assert merge_parts({}, [fresh], ROOT)["parts"] == {PARTS[0].name: fresh}


def test_merge_refuses_a_stale_failed_or_unknown_part_record() -> None:
    with pytest.raises(ValueError, match="stale"):
        merge_parts({}, [entry(ROOT, PARTS[0], files_hash="0" * 64)], ROOT)
    with pytest.raises(ValueError, match="failures"):
        merge_parts({}, [entry(ROOT, PARTS[0], "1 failed in 1.00s")], ROOT)
    with pytest.raises(ValueError, match="not a part"):
        merge_parts({}, [{**entry(ROOT, PARTS[0]), "part": "nope"}], ROOT)


def seconds_record(**seconds: float) -> dict:
    return {"format": FORMAT, "parts": {name: {"pytest": {"seconds": s}} for name, s in seconds.items()}}


def test_plan_deals_the_longest_part_first_to_the_queue_that_ends_soonest() -> None:
    record = seconds_record(a=400, b=300, c=200, d=100, e=250)
    assert plan_gpus(record, ["d", "c", "b", "a"], 2) == [["a", "d"], ["b", "c"]]
    assert plan_gpus(record, ["a", "b", "c", "d", "e"], 3) == [["a"], ["b", "d"], ["e", "c"]]
    assert plan_gpus(record, ["a", "b"], 4) == [["a"], ["b"], [], []]
    assert plan_gpus(record, ["c", "a"], 0) == [["a", "c"]]


def test_plan_counts_a_part_never_recorded_as_the_longest_known() -> None:
    record = seconds_record(a=400, b=300)
    assert plan_gpus(record, ["b", "new", "a"], 2) == [["new", "b"], ["a"]]
    assert plan_gpus({}, ["x", "y"], 2) == [["x"], ["y"]]
    assert plan_gpus(seconds_record(a=10, c=50, b="n/a"), ["a", "b"], 1) == [["b", "a"]]


# --- the command line -------------------------------------------------------------------------------------


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_record", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_merge_cli_puts_a_part_in_and_exits_2_on_a_stale_one(tmp_path: Path) -> None:
    record = tmp_path / "gpu_tests.json"
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(entry(ROOT, PARTS[0])))
    bad.write_text(json.dumps(entry(ROOT, PARTS[1], files_hash="0" * 64)))
    done = run_script("merge", str(bad), "--record", str(record))
    assert done.returncode == 2 and "stale" in done.stderr and not record.exists()
    done = run_script("merge", str(good), "--record", str(record))
    assert done.returncode == 0, done.stderr
    assert list(json.loads(record.read_text())["parts"]) == [PARTS[0].name]
    assert " ".join(p.name for p in PARTS[1:]) in done.stdout
    stale = run_script("stale", "--record", str(record))
    assert stale.stdout.split() == [p.name for p in PARTS[1:]]
    check = run_script("check", "--record", str(record))
    assert check.returncode == 1 and f"part {PARTS[1].name}: not in the record" in check.stdout


def test_check_cli_passes_a_record_of_every_part(tmp_path: Path) -> None:
    record = tmp_path / "gpu_tests.json"
    record.write_text(json.dumps(record_of(*(entry(ROOT, part) for part in PARTS))))
    done = run_script("check", "--record", str(record))
    assert done.returncode == 0, done.stdout + done.stderr
    assert run_script("stale", "--record", str(record)).stdout.strip() == ""


def test_the_script_runs_standalone_outside_the_package(tmp_path: Path) -> None:
    """CI runs `python benchmarks/gpu_record.py check`: no `benchmarks` package on sys.path then."""
    record = tmp_path / "gpu_tests.json"
    record.write_text(json.dumps(record_of(*(entry(ROOT, part) for part in PARTS))))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "check", "--record", str(record)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_plan_cli_prints_a_line_per_gpu_and_refuses_an_unknown_part(tmp_path: Path) -> None:
    record = tmp_path / "gpu_tests.json"
    record.write_text(json.dumps(seconds_record(**{PARTS[0].name: 50, PARTS[1].name: 100})))
    done = run_script("plan", "--gpus", "3", "--record", str(record), PARTS[0].name, PARTS[1].name)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{PARTS[1].name}\n{PARTS[0].name}\n\n"
    refused = run_script("plan", "--gpus", "2", "--record", str(record), PARTS[0].name, "nope")
    assert refused.returncode == 2 and "not parts of PARTS: nope" in refused.stderr


def test_check_cli_fails_without_a_record(tmp_path: Path) -> None:
    assert run_script("check", "--record", str(tmp_path / "missing.json")).returncode == 1


# --- the project's own record -----------------------------------------------------------------------------


def test_the_gpu_record_matches_this_checkout() -> None:
    """Every part's GPU tests passed on a GPU for exactly the files it covers in this checkout."""
    if not RECORD.exists():
        pytest.fail(f"{RECORD.relative_to(ROOT)} does not exist. {REFRESH}", pytrace=False)
    problems = record_problems(json.loads(RECORD.read_text()), ROOT)
    assert problems == [], (
        "the GPU record does not hold:\n" + "\n".join(problems) + f"\nRefresh it: {REFRESH}"
    )


def test_a_part_stopped_from_outside_takes_its_pytest_with_it(tmp_path: Path) -> None:
    """`timeout` stops a part with SIGTERM: the tests it was running must not run on as orphans."""
    pid_file = tmp_path / "pid"
    test = tmp_path / "test_sleeps.py"
    test.write_text(
        "import os, time\n"
        f"def test_sleeps():\n    open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n    time.sleep(120)\n"
    )
    code = f"from benchmarks.gpu_record import run_pytest; run_pytest([{str(test)!r}, '-p', 'no:randomly'])"
    wrapper = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the test never started"
        time.sleep(0.1)
    sleeper = int(pid_file.read_text())
    wrapper.send_signal(signal.SIGTERM)
    out, _ = wrapper.communicate(timeout=30)
    assert wrapper.returncode == 128 + signal.SIGTERM
    assert "pytest killed" in out
    deadline = time.monotonic() + 10
    while (
        Path(f"/proc/{sleeper}").exists() and "Z" not in Path(f"/proc/{sleeper}/stat").read_text().split()[2]
    ):
        assert time.monotonic() < deadline, "pytest outlived the part"
        time.sleep(0.1)


def test_no_test_folder_is_named_gpu() -> None:
    """tests/conftest.py skips an item whose keywords hold 'gpu' where no GPU is visible, and pytest counts
    every folder of a test's path among its keywords: CPU tests in a folder named gpu would skip silently
    (tests/intelliperf/backends/ holds the backends' tests for that reason)."""
    folders = {p.parent for p in (ROOT / "tests").rglob("test_*.py")}
    assert sorted(str(f.relative_to(ROOT)) for f in folders if "gpu" in f.relative_to(ROOT).parts) == []


# --- scripts/device-gpu-record: queues of parts per GPU, a deadline -----------------------------------

# Stands in for benchmarks/gpu_record.py on the GPU machine: `plan` deals the parts in turn, `run` notes
# its GPU and times, sleeping as long as PART_SLEEP says, instead of running a part's GPU tests.
STUB = """
import json, os, sys, time
command, rest = sys.argv[1], sys.argv[2:]
if command == "plan":
    gpus, parts = int(rest[1]), rest[2:]
    if "nope" in parts:
        sys.exit("gpu_record plan: not parts of PARTS: nope")
    for i in range(gpus):
        print(" ".join(parts[i::gpus]))
elif command == "run":
    part, out = rest[1], rest[5]
    began = time.time()
    time.sleep(float(json.loads(os.environ["PART_SLEEP"]).get(part, 0)))
    record = {"part": part, "gpu": os.environ["CUDA_VISIBLE_DEVICES"], "began": began, "ended": time.time()}
    open(out, "w").write(json.dumps(record))
    print("ran", part)
"""


def run_device_record(
    tmp_path: Path,
    parts: list[str],
    sleeps: dict[str, float],
    deadline: int,
    *,
    exit_code: int = 0,
    gpus: str = "3 5",
    queues_per_gpu: str = "1",
    record: dict | None = None,
) -> dict:
    checkout, out = tmp_path / "checkout", tmp_path / "out"
    (checkout / "benchmarks").mkdir(parents=True)
    if record is not None:
        (checkout / "benchmarks" / "results").mkdir()
        (checkout / "benchmarks" / "results" / "gpu_tests.json").write_text(json.dumps(record))
    (checkout / "benchmarks" / "__init__.py").write_text("")
    (checkout / "benchmarks" / "gpu_record.py").write_text(STUB)
    (checkout / ".devsite").mkdir()
    subprocess.run(["tar", "-cJf", str(checkout / ".devsite" / "site.tar.xz"), "-T", "/dev/null"], check=True)
    out.mkdir()
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "OUT": str(out),
        "DEVICE_SITE": str(tmp_path / "site"),
        "RECORD_GPUS": gpus,
        "RECORD_QUEUES_PER_GPU": queues_per_gpu,
        "RECORD_DEADLINE_S": str(deadline),
        "PART_SLEEP": json.dumps(sleeps),
    }
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "device-gpu-record"), "abc1234", *parts],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == exit_code, done.stdout + done.stderr
    if exit_code:
        return {"stdout": done.stdout, "stderr": done.stderr}
    subprocess.run(["tar", "-xzf", str(out / "gpu_parts.tgz"), "-C", str(out)], check=True)
    logs = {p.name.removeprefix("gpu_part_").removesuffix(".log"): p.read_text() for p in out.glob("*.log")}
    runs = {p.name.removeprefix("gpu_part_").removesuffix(".json"): json.loads(p.read_text())
            for p in out.glob("*.json")}  # fmt: skip
    return {"logs": logs, "runs": runs, "stdout": done.stdout}


def test_each_gpu_runs_its_parts_in_turn_and_the_gpus_side_by_side(tmp_path: Path) -> None:
    seen = run_device_record(tmp_path, ["a", "b", "c"], {"a": 1.5, "b": 1.5}, deadline=580)
    runs = seen["runs"]
    assert {name: run["gpu"] for name, run in runs.items()} == {"a": "3", "b": "5", "c": "3"}
    assert runs["c"]["began"] >= runs["a"]["ended"]  # one after another on GPU 3
    assert runs["b"]["began"] < runs["a"]["ended"]  # GPU 5 alongside
    assert "== c: ran c" in seen["stdout"]


def test_several_queues_share_one_gpu(tmp_path: Path) -> None:
    seen = run_device_record(
        tmp_path, ["a", "b", "c", "d"], {"a": 1.5, "b": 1.5}, deadline=580, gpus="3", queues_per_gpu="3"
    )
    runs = seen["runs"]
    assert {run["gpu"] for run in runs.values()} == {"3"}
    assert runs["b"]["began"] < runs["a"]["ended"] and runs["c"]["began"] < runs["a"]["ended"]  # side by side
    assert runs["d"]["began"] >= runs["a"]["ended"]  # the first queue's second part, after its first
    bad = run_device_record(tmp_path / "bad", ["a"], {}, deadline=580, exit_code=2, queues_per_gpu="0")
    assert "RECORD_QUEUES_PER_GPU must be a positive whole number" in bad["stderr"]


def test_the_queues_are_dealt_round_the_gpus(tmp_path: Path) -> None:
    """The plan puts its longest queues first: with two queues on each of two GPUs, the first two queues
    go to different GPUs (dealt GPU by GPU, the two longest had shared GPU 3)."""
    seen = run_device_record(tmp_path, ["a", "b", "c", "d"], {}, deadline=580, queues_per_gpu="2")
    gpus = {name: run["gpu"] for name, run in seen["runs"].items()}
    assert gpus == {"a": "3", "b": "5", "c": "3", "d": "5"}


def test_no_part_starts_with_less_than_a_minute_left_of_the_deadline(tmp_path: Path) -> None:
    seen = run_device_record(tmp_path, ["a", "b", "c"], {"a": 3}, deadline=62)
    assert set(seen["runs"]) == {"a", "b"}  # c waited behind a on GPU 3: 59 s or less were left
    assert "c not started" in seen["logs"]["c"] and "of RECORD_DEADLINE_S" in seen["logs"]["c"]
    none = run_device_record(tmp_path / "none", ["a", "b"], {}, deadline=59)
    assert none["runs"] == {} and all("not started" in log for log in none["logs"].values())


def test_a_part_is_not_started_with_less_time_left_than_its_last_run_took(tmp_path: Path) -> None:
    """b waits behind a (3 s) on GPU 3 with a deadline of 66 s: about 62 s are left, less than b's last 70 s
    and more than c's last 50 s; d was never recorded and e's record is unreadable, so they start."""
    record = {
        "parts": {
            "b": {"pytest": {"seconds": 70.4}},
            "c": {"pytest": {"seconds": 50.0}},
            "e": {"pytest": {"seconds": "n/a"}},
        }
    }
    seen = run_device_record(
        tmp_path, ["a", "d", "b", "c", "e"], {"a": 3}, deadline=66, gpus="3", record=record
    )
    assert set(seen["runs"]) == {"a", "d", "c", "e"}, seen["logs"]
    assert re.search(
        r"b not started: its last run took 70 s, 6[0-3] s left of RECORD_DEADLINE_S", seen["logs"]["b"]
    )


def test_a_plan_that_fails_stops_the_script_before_any_part_runs(tmp_path: Path) -> None:
    failed = run_device_record(tmp_path, ["a", "nope"], {}, deadline=580, exit_code=2)
    assert "not parts of PARTS: nope" in failed["stderr"] and "== a:" not in failed["stdout"]

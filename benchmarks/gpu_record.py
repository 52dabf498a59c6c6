"""The GPU record: proof that each GPU test passed on a GPU for exactly the code it drives in this checkout.

CI has no GPU, so it cannot run the tests marked ``gpu``. Instead, whoever changes code that runs on or
drives the GPU runs those tests on a GPU machine with this script and commits the record it writes,
``benchmarks/results/gpu_tests.json``. The GPU tests are split into the parts of ``PARTS``: each part names
its test files and the files its tests drive (glob patterns), to which every Python file of the repository
that those import (anywhere in them, lazily too) or run with ``-m`` is added, transitively; the record
holds, per part, a sha256 over those files and the part's own definition, with the device, the commit and
pytest's counts. CI
(tests/test_gpu_record.py) recomputes every part's hash: a change to one part's files makes that part
stale, and only that part needs running again.

A part's hash does not depend on file system order or file modes: sha256 over the part's definition (its
name, tests and patterns as JSON) and then, for each covered file in sorted order, its relative POSIX path,
a NUL byte, its byte length in decimal, a NUL byte, and its bytes.

    # on the GPU machine (in the repository root): the stale parts, a queue a GPU (scripts/device-gpu-record)
    python -m benchmarks.gpu_record stale                      # prints their names
    python -m benchmarks.gpu_record plan --gpus 4              # a line per GPU: the parts it runs in turn
    python -m benchmarks.gpu_record run --part loop --commit <sha> --out /tmp/gpu_part_loop.json

    # locally: put the parts' records into the record, then check it
    python -m benchmarks.gpu_record merge gpu_part_*.json
    python -m benchmarks.gpu_record check

``run`` exits with pytest's exit code; ``merge`` exits 2 when a part record is not one of this checkout's
files (stale already) or not a passing run of its part; ``check`` exits 1 when any part is stale, missing,
failed, passed no test, or was run with other arguments than its own; ``stale`` exits 0.

Standard library only, and no import of the project: the GPU machine has Python and pytest but not
necessarily this project's dependencies, and CI runs it as a script
(``python benchmarks/gpu_record.py check``).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "benchmarks" / "results" / "gpu_tests.json"
FORMAT = 3  # 3: a part also covers every Python file its files import (python_closure)


@dataclass(frozen=True)
class Part:
    """A set of GPU test files run together, and the files their tests drive."""

    name: str
    tests: tuple[str, ...]
    drives: tuple[str, ...]


# The repository's own top-level packages: imports of these are followed (python_closure).
PACKAGES = frozenset(
    {"accordo", "benchmarks", "formulas", "intelliperf", "profiler", "service", "tests", "worker"}
)
# Imports not followed from a file: the engine's CLI loads the service and the worker only for their own
# commands (`intelliperf serve`, `intelliperf worker`), which no GPU test runs through it; the parts that
# test the service or the worker import them themselves.
OTHER_COMMANDS = {"intelliperf/cli.py": frozenset({"service", "worker"})}
# What every GPU test depends on: which tests count as GPU tests and when they skip.
COMMON = ("tests/conftest.py",)
# the native profiler: the CUPTI injection library (sources, Makefile, FORMAT.md), its build, its driver
PROFILER = ("profiler/**/*.py", "profiler/native/*")
ACCORDO = (
    "accordo/**/*.py",
    *PROFILER,
    "tests/accordo/conftest.py",
    "tests/accordo/*.cu",
    "tests/accordo/*.cpp",
)
GPU_BACKEND = ("intelliperf/gpu/**/*.py",)
# Nsight Compute, the reference the CUPTI counter pass is compared with: its pass, readers and section
NCU = ("benchmarks/ncu/**/*",)
# the parts of the engine that profile, run candidates on the GPU and judge them, and its one entry point
ENGINE = (
    "intelliperf/engine/entry.py",
    "intelliperf/engine/diagnose.py",
    "intelliperf/engine/judge.py",
    "intelliperf/engine/unittest_judge.py",
    "intelliperf/engine/output_files.py",
    "intelliperf/engine/candidate.py",
)
# the examples the profile passes and the loop run (the accordo_* cases belong to the judge's parts)
EXAMPLES = (
    "examples/*.*",
    "examples/Makefile",
    *(
        f"examples/{folder.name}/**/*"
        for folder in sorted((ROOT / "examples").iterdir())
        if folder.is_dir() and not folder.name.startswith("accordo_")
    ),
)

# what `intelliperf run -f diagnoseOnly` runs: the profile passes, the engine's diagnosis, the formulas
DIAGNOSIS = (
    *PROFILER,
    *GPU_BACKEND,
    "intelliperf/engine/entry.py",
    "intelliperf/engine/diagnose.py",
    "formulas/**/*.py",
    *EXAMPLES,
)

# the fixed examples judged against their originals (three shards: tests/support/fixed_examples.py)
FIXED_EXAMPLES = (*ACCORDO, *EXAMPLES, "tests/support/fixed_examples.py")

REPEAT_SUPPORT = "tests/support/repeat_example.py"  # the row norm example built, its reference captured
LOOP_RUN = "tests/support/loop_run.py"  # `intelliperf run` with a scripted model

PARTS: tuple[Part, ...] = (
    Part(
        "validate",
        ("tests/accordo/test_gpu_validate.py",),
        (*ACCORDO, "examples/accordo_cases/*"),
    ),
    *(
        Part(
            f"fixed_examples_{shard}", (f"tests/accordo/test_gpu_fixed_examples_{shard}.py",), FIXED_EXAMPLES
        )
        for shard in ("cuda_a", "cuda_b", "python")
    ),
    Part(
        "validate_sums", ("tests/accordo/test_gpu_validate_sums.py",), (*ACCORDO, "examples/accordo_sums/*")
    ),
    Part(
        "native",
        (
            "tests/accordo/test_gpu_native.py",
            "tests/accordo/test_gpu_torch_extension.py",
            "tests/benchmarks/test_event_harness.py",
        ),
        (*ACCORDO, "examples/accordo_timing/*", "benchmarks/event_harness.py"),
    ),
    Part(
        "diagnose",
        ("tests/test_gpu_diagnose.py",),
        (
            *ACCORDO,
            *GPU_BACKEND,
            *ENGINE,
            *EXAMPLES,
            "formulas/**/*.py",
            "benchmarks/diagnose.py",
            "tests/support/diagnose_run.py",
        ),
    ),
    Part(
        "diagnose_clean",
        ("tests/test_gpu_diagnose_clean.py",),
        (*DIAGNOSIS, "tests/support/diagnose_run.py"),
    ),
    Part(
        "counters",
        ("tests/test_gpu_counters.py", "tests/test_gpu_ncu_pages.py"),
        (*PROFILER, *GPU_BACKEND, *NCU, *EXAMPLES, "benchmarks/counter_pass.py"),
    ),
    Part("proton", ("tests/test_gpu_proton.py",), (*GPU_BACKEND, "examples/triton_*/*")),
    Part(
        "worker",
        ("tests/test_gpu_worker.py", "tests/worker/test_gpu_and_source.py"),
        (*ACCORDO, *GPU_BACKEND, *ENGINE, *EXAMPLES, "worker/gpu.py", "benchmarks/loop_scenarios.py"),
    ),
    *(
        Part(
            name,
            (test,),
            (*ACCORDO, *GPU_BACKEND, *ENGINE, *EXAMPLES, "benchmarks/loop_scenarios.py", LOOP_RUN),
        )
        for name, test in (
            ("loop", "tests/test_gpu_loop.py"),
            ("loop_torch", "tests/test_gpu_loop_torch.py"),
            ("loop_unittest", "tests/test_gpu_loop_unittest.py"),
        )
    ),
    *(
        Part(name, (test,), (*ACCORDO, *ENGINE, "examples/accordo_repeat/*", REPEAT_SUPPORT))
        for name, test in (
            ("repeat", "tests/accordo/test_gpu_repeat.py"),
            ("repeat_twenty", "tests/accordo/test_gpu_repeat_twenty.py"),
        )
    ),
    Part(
        "replay",
        ("tests/accordo/test_gpu_replay.py",),
        (
            *ACCORDO,
            *GPU_BACKEND,
            "examples/accordo_repeat/*",
            "intelliperf/cli.py",
            "intelliperf/console.py",
            "intelliperf/summary.py",
        ),
    ),
    Part(
        "tracking",
        ("tests/test_gpu_tracking.py",),
        (
            *DIAGNOSIS,
            "intelliperf/tracking/**/*.py",
            "service/kernel_samples.py",
            "service/regressions.py",
            "service/jobs.py",
            "service/db/**/*.py",
            "tests/support/diagnose_run.py",
        ),
    ),
)
PARTS_BY_NAME = {part.name: part for part in PARTS}

# Never hashed: caches and build outputs (a make in place must not make the record stale).
EXCLUDED_DIRS = frozenset({"__pycache__", "bin", "build"})
EXCLUDED_SUFFIXES = (".pyc", ".o", ".so", ".ncu-rep")
EXCLUDED_NAMES = frozenset({"report.json"})

PYTEST = ("-m", "pytest", "-v", "-p", "no:cacheprovider")  # -v: a line per test, so progress shows
UNKNOWN_PART_S = 300.0  # a part's length, for plan_gpus, when no part was ever recorded
COUNTS = ("passed", "failed", "skipped", "errors", "xfailed", "xpassed", "deselected", "warnings")
# pytest's words in its summary line -> the record's keys
WORDS = {"error": "errors", "warning": "warnings", **{key: key for key in COUNTS}}
_ITEM = rf"\d+ (?:{'|'.join(sorted(WORDS, key=len, reverse=True))})"
SUMMARY = re.compile(
    rf"^=*\s*(?P<items>{_ITEM}(?:, {_ITEM})*|no tests ran)"
    r" in (?P<seconds>\d+(?:\.\d+)?)s(?: \(\d+(?::\d+)+\))?\s*=*\s*$"
)
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _excluded(rel: str) -> bool:
    path = PurePosixPath(rel)
    return (
        rel.endswith(EXCLUDED_SUFFIXES)
        or path.name in EXCLUDED_NAMES
        or any(p in EXCLUDED_DIRS for p in path.parts)
    )


def part_args(part: Part) -> list[str]:
    """The pytest arguments a part runs with: only GPU tests, all of them, in its files."""
    return ["-m", "gpu", *part.tests]


def module_file(root: Path, name: str) -> str | None:
    """The file under ``root`` that module ``name`` is (a package's ``__init__.py``), if it is one of
    this repository's packages."""
    parts = name.split(".")
    if parts[0] not in PACKAGES or not all(part.isidentifier() for part in parts):
        return None
    base = root.joinpath(*parts)
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.is_file():
            return candidate.relative_to(root).as_posix()
    return None


def _module_name(rel: str) -> tuple[str, bool]:
    """The dotted name of the module file ``rel`` and whether it is a package's ``__init__``."""
    parts = list(PurePosixPath(rel).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def _spawned(node: ast.AST) -> list[str]:
    """The modules a sequence of arguments runs with ``-m`` (``[sys.executable, "-m", "intelliperf"]``)."""
    items = node.elts if isinstance(node, ast.List | ast.Tuple) else getattr(node, "args", [])
    values = [i.value if isinstance(i, ast.Constant) and isinstance(i.value, str) else None for i in items]
    return [after for before, after in itertools.pairwise(values) if before == "-m" and after]


def imported_names(source: str, rel: str) -> set[str]:
    """The modules (with their parent packages) that the Python file ``rel`` imports anywhere in it, a
    function's lazy imports included, and those it runs in a subprocess with ``-m`` (with __main__)."""
    module, is_package = _module_name(rel)
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.List | ast.Tuple | ast.Call):
            for spawned in _spawned(node):
                names.update((spawned, f"{spawned}.__main__"))
    with_parents = set()
    for name in names:
        parts = name.split(".")
        with_parents.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return with_parents


_IMPORTS: dict[tuple[str, int, int], set[str]] = {}


def _imports_of(path: Path, rel: str) -> set[str]:
    """imported_names of a file, parsed once per content (by path, modification time and size)."""
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _IMPORTS:
        try:
            _IMPORTS[key] = imported_names(path.read_text(), rel)
        except (SyntaxError, UnicodeDecodeError):
            _IMPORTS[key] = set()
    return _IMPORTS[key]


def python_closure(root: Path, starts: list[str]) -> set[str]:
    """The repository's Python files that ``starts`` reach by import or ``-m``, transitively, with every
    ``conftest.py`` pytest loads for a test file among them."""
    seen: set[str] = set()
    queue = [rel for rel in starts if rel.endswith(".py") and (root / rel).is_file()]
    while queue:
        rel = queue.pop()
        if rel in seen:
            continue
        seen.add(rel)
        names = _imports_of(root / rel, rel)
        skipped = OTHER_COMMANDS.get(rel, frozenset())
        names = {name for name in names if name.split(".")[0] not in skipped}
        reached = {module_file(root, name) for name in names}
        folders = PurePosixPath(rel).parents if rel.startswith("tests/") else ()
        reached.update(f"{folder}/conftest.py" for folder in folders if folder.parts[:1] == ("tests",))
        queue.extend(r for r in reached if r and r not in seen and (root / r).is_file())
    return seen


def covered_files(root: Path, part: Part) -> list[str]:
    """The files under ``root`` that ``part`` covers, sorted: its tests, what its ``drives`` patterns name
    (native sources, examples), COMMON, and every Python file of the repository those reach by import or
    run with ``-m`` (python_closure), so a module imported anywhere below a test is never left out."""
    found: set[str] = set()
    for pattern in (*COMMON, *part.tests, *part.drives):
        for path in root.glob(pattern):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not _excluded(rel):
                found.add(rel)
    found |= {rel for rel in python_closure(root, sorted(found)) if not _excluded(rel)}
    return sorted(found)


def part_hash(root: Path, part: Part) -> tuple[str, list[str]]:
    """The sha256 (hex) of ``part``'s definition and covered files under ``root``, and those files."""
    files = covered_files(root, part)
    digest = hashlib.sha256(json.dumps(asdict(part), sort_keys=True).encode() + b"\0")
    for rel in files:
        data = (root / rel).read_bytes()
        digest.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0")
        digest.update(data)
    return digest.hexdigest(), files


def marks_gpu(source: str) -> bool:
    """Whether Python ``source`` uses ``pytest.mark.gpu`` (as code, not in a string)."""
    return any(
        isinstance(node, ast.Attribute)
        and node.attr == "gpu"
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "mark"
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id == "pytest"
        for node in ast.walk(ast.parse(source))
    )


def gpu_test_files(root: Path) -> list[str]:
    """Every test file under ``root``/tests that marks a test ``gpu``."""
    return sorted(
        path.relative_to(root).as_posix()
        for path in (root / "tests").rglob("test_*.py")
        if not _excluded(path.relative_to(root).as_posix()) and marks_gpu(path.read_text())
    )


def layout_problems(root: Path, parts: tuple[Part, ...] = PARTS) -> list[str]:
    """What is wrong with the parts themselves: a GPU test file in no part or in two, a missing file."""
    problems = []
    owners: dict[str, list[str]] = {}
    for part in parts:
        for test in part.tests:
            owners.setdefault(test, []).append(part.name)
            if not (root / test).is_file():
                problems.append(f"part {part.name}: its test file {test} does not exist")
    for test in gpu_test_files(root):
        if test not in owners:
            problems.append(f"{test} has GPU tests but is in no part of benchmarks/gpu_record.py PARTS")
    for test, names in owners.items():
        if len(names) > 1:
            problems.append(f"{test} is in more than one part: {', '.join(names)}")
    if len({part.name for part in parts}) != len(parts):
        problems.append("two parts have the same name")
    return problems


def parse_summary(text: str) -> dict:
    """The counts, seconds and line of the last pytest summary line in ``text``; ValueError if none."""
    for line in reversed(ANSI.sub("", text).splitlines()):
        match = SUMMARY.match(line.strip())
        if match is None:
            continue
        result: dict = dict.fromkeys(COUNTS, 0)
        if match["items"] != "no tests ran":
            for item in match["items"].split(", "):
                number, word = item.split(" ")
                result[WORDS[word]] += int(number)
        result["seconds"] = float(match["seconds"])
        result["summary"] = line.strip().strip("=").strip()
        return result
    raise ValueError("no pytest summary line (e.g. '26 passed in 69.40s (0:01:09)') in the output")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def device_name() -> str:
    """The first GPU's name from nvidia-smi, or "unknown" without one (benchmarks.common serves it to the
    other benchmarks: this script must run standalone, as ``python benchmarks/gpu_record.py``)."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return "unknown"
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def run_pytest(args: list[str]) -> tuple[int, str]:
    """Run pytest, streaming its output to stdout; its exit code and the whole output. Stopped from outside
    (SIGTERM, e.g. by ``timeout``), it takes pytest and everything pytest started with it."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, *PYTEST, *args]
    print("$", " ".join(argv), flush=True)
    kept: list[str] = []
    with subprocess.Popen(
        argv,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    ) as proc:

        def stop(signum: int, _frame: object) -> None:
            os.killpg(proc.pid, signal.SIGKILL)
            print(f"gpu_record: stopped by signal {signum}; pytest killed", flush=True)
            sys.exit(128 + signum)

        signal.signal(signal.SIGTERM, stop)
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.append(line)
    return proc.returncode, "".join(kept)


def part_record(part: Part, output: str, commit: str | None, root: Path = ROOT) -> dict:
    """The record of one run of ``part`` whose pytest output is ``output``."""
    digest, files = part_hash(root, part)
    summary = parse_summary(output)
    counts = {key: summary[key] for key in COUNTS}
    counts.update(summary=summary["summary"], seconds=summary["seconds"])
    return {
        "part": part.name,
        "args": part_args(part),
        "files_hash": digest,
        "files": files,
        "device": device_name(),
        "commit": commit,
        "pytest": counts,
        "recorded_at": now(),
    }


def part_problems(part: Part, entry: dict | None, root: Path) -> list[str]:
    """What is wrong with ``entry``, the record of ``part``, for the checkout at ``root``."""
    if entry is None:
        return [f"part {part.name}: not in the record"]
    problems = []
    digest, files = part_hash(root, part)
    if entry.get("files_hash") != digest:
        recorded = set(entry.get("files", []))
        added, removed = sorted(set(files) - recorded), sorted(recorded - set(files))
        problems.append(
            f"part {part.name}: stale (its files or definition changed since it ran at {entry.get('commit')})"
            + "".join(f"\n  new file: {rel}" for rel in added)
            + "".join(f"\n  file gone: {rel}" for rel in removed)
        )
    if entry.get("args") != part_args(part):
        problems.append(f"part {part.name}: run with {entry.get('args')}, not its own {part_args(part)}")
    counts = entry.get("pytest", {})
    if int(counts.get("failed", 0)) + int(counts.get("errors", 0)):
        problems.append(f"part {part.name}: failures or errors: {counts.get('summary')}")
    if int(counts.get("passed", 0)) == 0:
        problems.append(f"part {part.name}: no passed test: {counts.get('summary')}")
    if int(counts.get("skipped", 0)):
        problems.append(f"part {part.name}: skipped GPU tests: {counts.get('summary')}")
    return problems


def record_problems(record: dict, root: Path, parts: tuple[Part, ...] = PARTS) -> list[str]:
    """Everything wrong with ``record`` for the checkout at ``root``; empty when every part holds."""
    if record.get("format") != FORMAT:
        return [f"the record is not in format {FORMAT} (one entry per part); run every part"]
    entries = record.get("parts", {})
    problems = layout_problems(root, parts)
    for part in parts:
        problems += part_problems(part, entries.get(part.name), root)
    known = {part.name for part in parts}
    problems += [f"part {name}: in the record but not in PARTS" for name in sorted(set(entries) - known)]
    return problems


def stale_parts(record: dict, root: Path, parts: tuple[Part, ...] = PARTS) -> list[str]:
    """The names of the parts that must run again (stale, missing, or not passing)."""
    entries = record.get("parts", {}) if record.get("format") == FORMAT else {}
    return [part.name for part in parts if part_problems(part, entries.get(part.name), root)]


def merge_parts(record: dict, part_records: list[dict], root: Path) -> dict:
    """``record`` with the parts in ``part_records`` put in; ValueError for one that does not belong."""
    merged = dict(record) if record.get("format") == FORMAT else {"format": FORMAT, "parts": {}}
    entries = dict(merged.get("parts", {}))
    for entry in part_records:
        part = PARTS_BY_NAME.get(entry.get("part", ""))
        if part is None:
            raise ValueError(f"{entry.get('part')!r} is not a part of PARTS")
        problems = part_problems(part, entry, root)
        if problems:
            raise ValueError("; ".join(problems))
        entries[part.name] = entry
    merged["parts"] = {name: entries[name] for name in sorted(entries)}
    return merged


def plan_gpus(record: dict, names: list[str], gpus: int) -> list[list[str]]:
    """``names`` dealt to ``gpus`` queues, each run one part after another, so that the longest queue is
    short: longest part first, each to the queue that ends soonest (a part's length is its last recorded
    run's, stale or not; a part never recorded counts as the longest known)."""
    entries = record.get("parts", {}) if record.get("format") == FORMAT else {}
    known = {
        name: float(entry["pytest"]["seconds"])
        for name, entry in entries.items()
        if isinstance(entry.get("pytest", {}).get("seconds"), int | float)
    }
    unknown = max(known.values(), default=UNKNOWN_PART_S)
    queues: list[list[str]] = [[] for _ in range(max(gpus, 1))]
    ends = [0.0] * len(queues)
    for name in sorted(names, key=lambda n: -known.get(n, unknown)):
        shortest = ends.index(min(ends))
        queues[shortest].append(name)
        ends[shortest] += known.get(name, unknown)
    return queues


def read_record(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def write_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def cmd_run(args: argparse.Namespace) -> int:
    part = PARTS_BY_NAME[args.part]
    with tempfile.TemporaryDirectory(prefix=f"gpu-part-{part.name}-") as basetemp:
        code, output = run_pytest([*part_args(part), f"--basetemp={basetemp}"])
    try:
        record = part_record(part, output, args.commit)
    except ValueError as err:
        print(f"gpu_record: {err}; no record written", file=sys.stderr)
        return code or 1
    write_json(args.out, record)
    print(
        f"gpu_record: wrote {args.out}: part {part.name}: {record['pytest']['summary']} on {record['device']}"
    )
    return code


def cmd_merge(args: argparse.Namespace) -> int:
    try:
        records = [json.loads(Path(path).read_text()) for path in args.parts]
        merged = merge_parts(read_record(args.record), records, ROOT)
    except (OSError, ValueError) as err:
        print(f"gpu_record merge: {err}", file=sys.stderr)
        return 2
    write_json(args.record, merged)
    names = ", ".join(r["part"] for r in records)
    left = stale_parts(merged, ROOT)
    print(f"gpu_record: put {names} into {args.record}; still to run: {' '.join(left) or 'nothing'}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    try:
        record = json.loads(args.record.read_text())
    except (OSError, ValueError) as err:
        print(f"gpu_record check: cannot read {args.record}: {err}", file=sys.stderr)
        return 1
    problems = record_problems(record, ROOT)
    for problem in problems:
        print(f"gpu_record check: {problem}")
    if problems:
        stale = " ".join(stale_parts(record, ROOT))
        print(
            f"refresh: on a GPU machine, scripts/device-gpu-record <commit> {stale}; then merge (see --help)"
        )
        return 1
    for name, entry in record["parts"].items():
        summary, device, commit = entry["pytest"]["summary"], entry["device"], entry["commit"]
        print(f"gpu_record check: {name}: ok ({summary} on {device} at {commit})")
    return 0


def cmd_stale(args: argparse.Namespace) -> int:
    print(" ".join(stale_parts(read_record(args.record), ROOT)))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    record = read_record(args.record)
    unknown = sorted(set(args.parts) - set(PARTS_BY_NAME))
    if unknown:
        print(f"gpu_record plan: not parts of PARTS: {' '.join(unknown)}", file=sys.stderr)
        return 2
    names = args.parts or stale_parts(record, ROOT)
    for queue in plan_gpus(record, names, args.gpus):
        print(" ".join(queue))
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one part's GPU tests and write its record")
    run.add_argument("--part", required=True, choices=sorted(PARTS_BY_NAME))
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--commit", default=None)
    merge = sub.add_parser("merge", help="put parts' records into the record (replacing those parts only)")
    merge.add_argument("parts", nargs="+", type=Path)
    merge.add_argument("--record", type=Path, default=RECORD)
    plan = sub.add_parser("plan", help="deal parts (default: the stale ones) to GPUs, a line each")
    plan.add_argument("parts", nargs="*")
    plan.add_argument("--gpus", type=int, default=1)
    plan.add_argument("--record", type=Path, default=RECORD)
    for name, help_ in (
        ("check", "exit 1 unless every part matches this checkout and passed"),
        ("stale", "print the names of the parts that must run again"),
    ):
        command = sub.add_parser(name, help=help_)
        command.add_argument("--record", type=Path, default=RECORD)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    commands = {"run": cmd_run, "merge": cmd_merge, "check": cmd_check, "stale": cmd_stale, "plan": cmd_plan}
    return commands[args.command](args)


if __name__ == "__main__":
    sys.exit(main())

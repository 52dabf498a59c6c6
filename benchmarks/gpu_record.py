"""The GPU record: proof that the GPU tests passed on a GPU for exactly the GPU code in this checkout.

CI has no GPU, so it cannot run the tests marked ``gpu``. Instead, whoever changes code that runs on or
drives the GPU runs those tests on a GPU machine with this script, and commits the record it writes,
``benchmarks/results/gpu_tests.json``. The record holds a sha256 over every file listed in ``HASHED`` (the
GPU code, the GPU tests and the programs they build, and this script), the device, the commit, and pytest's
counts. CI (tests/test_gpu_record.py) recomputes the hash: GPU code lands only after its GPU tests passed on
a GPU, after its last change. Any change to a hashed file makes the record stale until the tests are run
again.

The hash does not depend on file system order or file modes: sha256 over, for each file in sorted order, its
relative POSIX path, a NUL byte, its byte length in decimal, a NUL byte, and its bytes.

One device call is limited to 10 minutes, so the tests may be run in parts and the parts merged::

    # on the device machine (in the repository root; $OUT comes back)
    python benchmarks/gpu_record.py run --out $OUT/gpu_part1.json --commit <sha> -- tests/accordo
    python benchmarks/gpu_record.py run --out $OUT/gpu_part2.json --commit <sha> -- tests/test_gpu_loop.py

    # locally
    python benchmarks/gpu_record.py merge gpu_part1.json gpu_part2.json \
        --out benchmarks/results/gpu_tests.json
    python benchmarks/gpu_record.py check [--record benchmarks/results/gpu_tests.json]

``run`` exits with pytest's exit code; ``merge`` exits 2 when the parts do not belong together; ``check``
exits 1 when the record is stale (hash differs), shows failures or errors, or shows no passed test.

Standard library only: the GPU machine has Python and pytest but not necessarily this project's dependencies.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import device_name  # noqa: E402

RECORD = ROOT / "benchmarks" / "results" / "gpu_tests.json"

# Every file that runs on or drives the GPU, as glob patterns relative to the repository root. A pattern that
# matches nothing (e.g. a directory that does not exist yet) is fine.
HASHED: tuple[str, ...] = (
    # Accordo: the Python driver and the CUPTI injection library (sources, Makefile, FORMAT.md)
    "accordo/**/*.py",
    "accordo/native/*",
    # the GPU backend and the parts of the engine that run candidates on the GPU and judge them
    "intelliperf/gpu/**/*.py",
    "intelliperf/gpu/ncu_sections/*",  # what the counter pass asks ncu for, per instruction
    "intelliperf/engine/judge.py",
    "intelliperf/engine/unittest_judge.py",  # the project-tests judge: runs and times candidates
    "intelliperf/engine/output_files.py",  # what it compares of their outputs
    "intelliperf/engine/candidate.py",
    # the engine's one entry point: it picks the GPU backend, the model and the judge for every job
    "intelliperf/engine/entry.py",
    # the GPU tests and the programs they build
    "tests/**/test_gpu_*.py",
    "tests/accordo/*.cu",
    "tests/accordo/*.cpp",
    "tests/accordo/conftest.py",
    "tests/conftest.py",  # decides which tests count as GPU tests and when they skip
    "examples/accordo_cases/*",
    "examples/accordo_sums/*",
    "examples/accordo_repeat/*",
    # this script: how the record is made
    "benchmarks/gpu_record.py",
)
# Never hashed: caches and build outputs (a make in place must not make the record stale) ...
EXCLUDED_DIRS = frozenset({"__pycache__", "bin"})
EXCLUDED_SUFFIXES = (".pyc", ".o", ".so")
# ... and the CPU test of this record, which "tests/**/test_gpu_*.py" would otherwise match.
EXCLUDED_FILES = frozenset({"tests/test_gpu_record.py"})

PYTEST = ("-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider")
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
    parts = PurePosixPath(rel).parts
    return rel in EXCLUDED_FILES or rel.endswith(EXCLUDED_SUFFIXES) or any(p in EXCLUDED_DIRS for p in parts)


def hashed_files(root: Path) -> list[str]:
    """The files under ``root`` that HASHED names, as sorted relative POSIX paths."""
    found: set[str] = set()
    for pattern in HASHED:
        for path in root.glob(pattern):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not _excluded(rel):
                found.add(rel)
    return sorted(found)


def files_hash(root: Path) -> tuple[str, list[str]]:
    """The sha256 (hex) of the hashed files under ``root``, and their sorted relative paths."""
    files = hashed_files(root)
    digest = hashlib.sha256()
    for rel in files:
        data = (root / rel).read_bytes()
        digest.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0")
        digest.update(data)
    return digest.hexdigest(), files


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
        result["summary"] = line.strip()
        return result
    raise ValueError("no pytest summary line (e.g. '26 passed in 69.40s (0:01:09)') in the output")


def format_counts(counts: dict) -> str:
    """'3 failed, 50 passed' in pytest's order, leaving out zeros."""
    items = [f"{counts[key]} {key}" for key in COUNTS if counts.get(key)]
    return ", ".join(items) or "no tests ran"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def run_pytest(args: list[str]) -> tuple[int, str]:
    """Run the GPU tests, streaming their output to stdout; pytest's exit code and the whole output."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    argv = [sys.executable, *PYTEST, *args]
    print("$", " ".join(argv), flush=True)
    kept: list[str] = []
    with subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            kept.append(line)
    return proc.returncode, "".join(kept)


def make_record(output: str, args: list[str], commit: str | None) -> dict:
    """The record of one pytest run whose output is ``output``."""
    digest, files = files_hash(ROOT)
    summary = parse_summary(output)
    pytest_part = {key: summary[key] for key in COUNTS}
    pytest_part.update(summary=summary["summary"], args=args, seconds=summary["seconds"])
    return {
        "device": device_name(),
        "commit": commit,
        "files_hash": digest,
        "files": files,
        "pytest": pytest_part,
        "recorded_at": now(),
    }


def _parts(record: dict) -> list[dict]:
    """A record's parts (a merged record has several), each with its counts, summary, args, seconds."""
    pytest_ = record["pytest"]
    if pytest_.get("parts"):
        return list(pytest_["parts"])
    part = {key: pytest_.get(key, 0) for key in COUNTS}
    part.update(
        summary=pytest_.get("summary"),
        args=pytest_.get("args", []),
        seconds=pytest_.get("seconds", 0.0),
        recorded_at=record.get("recorded_at"),
    )
    return [part]


def _same(records: list[dict], names: list[str], key: str) -> object:
    values = {json.dumps(r.get(key)) for r in records}
    if len(values) > 1:
        listing = "\n".join(f"  {name}: {r.get(key)}" for name, r in zip(names, records, strict=True))
        raise ValueError(f"the parts differ in {key}, so they are not one run of the same files:\n{listing}")
    return records[0].get(key)


def merge_records(records: list[dict], names: list[str] | None = None) -> dict:
    """One record from parts of the same files on the same device: counts summed, each part kept.

    ``names`` (e.g. the parts' file names) are used in the ValueError raised when the parts' files_hash,
    device or (non-null) commit differ.
    """
    if not records:
        raise ValueError("nothing to merge")
    names = names or [f"part {i + 1}" for i in range(len(records))]
    digest = _same(records, names, "files_hash")
    device = _same(records, names, "device")
    commits = [
        (n, r.get("commit")) for n, r in zip(names, records, strict=True) if r.get("commit") is not None
    ]
    if len({c for _, c in commits}) > 1:
        listing = "\n".join(f"  {name}: {commit}" for name, commit in commits)
        raise ValueError(f"the parts were recorded at different commits:\n{listing}")
    parts = [part for record in records for part in _parts(record)]
    merged = {key: sum(int(part.get(key, 0)) for part in parts) for key in COUNTS}
    seconds = round(sum(float(part.get("seconds", 0.0)) for part in parts), 2)
    merged.update(
        summary=f"{format_counts(merged)} in {seconds:.2f}s ({len(parts)} parts)",
        args=[arg for part in parts for arg in part.get("args", [])],
        seconds=seconds,
        parts=parts,
    )
    stamps = [r["recorded_at"] for r in records if r.get("recorded_at")]
    return {
        "device": device,
        "commit": commits[0][1] if commits else None,
        "files_hash": digest,
        "files": records[0].get("files", []),
        "pytest": merged,
        "recorded_at": max(stamps) if stamps else now(),
    }


def check_record(record: dict, root: Path) -> list[str]:
    """What is wrong with ``record`` for the checkout at ``root``; empty when it holds."""
    problems = []
    digest, files = files_hash(root)
    if record.get("files_hash") != digest:
        recorded = set(record.get("files", []))
        added, removed = sorted(set(files) - recorded), sorted(recorded - set(files))
        problems.append(
            f"the hashed files changed since the record: record {record.get('files_hash')}, "
            f"this checkout {digest} ({len(files)} files)"
            + "".join(f"\n  new file: {rel}" for rel in added)
            + "".join(f"\n  file gone: {rel}" for rel in removed)
            + ("\n  (the same files: one or more of them changed)" if not added and not removed else "")
        )
    pytest_ = record.get("pytest", {})
    bad = int(pytest_.get("failed", 0)) + int(pytest_.get("errors", 0))
    if bad:
        problems.append(f"the record shows failures or errors: {pytest_.get('summary')}")
    if int(pytest_.get("passed", 0)) == 0:
        problems.append(f"the record shows no passed test: {pytest_.get('summary')}")
    return problems


def write_json(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2) + "\n")


def cmd_run(args: argparse.Namespace, pytest_args: list[str]) -> int:
    code, output = run_pytest(pytest_args)
    try:
        record = make_record(output, pytest_args, args.commit)
    except ValueError as err:
        print(f"gpu_record: {err}; no record written", file=sys.stderr)
        return code or 1
    write_json(args.out, record)
    print(f"gpu_record: wrote {args.out}: {record['pytest']['summary']} on {record['device']}")
    return code


def cmd_merge(args: argparse.Namespace) -> int:
    records = [json.loads(Path(part).read_text()) for part in args.parts]
    try:
        merged = merge_records(records, [str(part) for part in args.parts])
    except ValueError as err:
        print(f"gpu_record merge: {err}", file=sys.stderr)
        return 2
    write_json(args.out, merged)
    local, _ = files_hash(ROOT)
    state = "matches" if local == merged["files_hash"] else "does NOT match"
    print(f"gpu_record: wrote {args.out}: {merged['pytest']['summary']}; this checkout's hash {state}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    try:
        record = json.loads(args.record.read_text())
    except (OSError, ValueError) as err:
        print(f"gpu_record check: cannot read {args.record}: {err}", file=sys.stderr)
        return 1
    problems = check_record(record, ROOT)
    for problem in problems:
        print(f"gpu_record check: {problem}")
    if problems:
        print("refresh: run the GPU tests on a GPU machine: python benchmarks/gpu_record.py run (see --help)")
        return 1
    print(f"gpu_record check: ok ({record['pytest']['summary']} on {record.get('device')})")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = top.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the GPU tests and write a record; pytest arguments go after --")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--commit", default=None)
    merge = sub.add_parser("merge", help="combine partial records of the same files into one")
    merge.add_argument("parts", nargs="+", type=Path)
    merge.add_argument("--out", type=Path, required=True)
    check = sub.add_parser("check", help="exit 1 unless the record matches this checkout and passed")
    check.add_argument("--record", type=Path, default=RECORD)
    return top


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = parser().parse_args(argv)
    if args.command == "run":
        return cmd_run(args, extra)
    if extra:
        parser().error(f"{args.command} takes no arguments after --")
    return cmd_merge(args) if args.command == "merge" else cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())

"""The AMD passes through rocprofv3 (ROCprofiler-SDK): build its commands, run them, parse its CSV files.

Timing pass: ``rocprofv3 --kernel-trace --output-format csv --output-directory DIR -- app`` writes one
row per kernel dispatch; dispatches are grouped by kernel name and ranked by total time, as Accordo's
tracer does on NVIDIA (``profiler.trace.KernelStats``).
Counter pass: ``rocprofv3 --pmc A,B,... --kernel-include-regex '^(k1|k2)$' --kernel-iteration-range
[1] ...`` collects the counters on the first dispatch of each top kernel only.

What this follows, from ROCprofiler-SDK's own documentation and source (``source/docs/how-to/
using-rocprofv3.rst``, ``source/docs/data/*.csv`` and ``source/lib/output/generateCSV.cpp`` in
ROCm/rocm-systems ``projects/rocprofiler-sdk``, develop of 2025-08; ROCm/rocprofiler-sdk of 2024-10):

- Files: ``<output_path>/<output_file>_<domain>.csv``, with ``output_file`` defaulting to
  ``%hostname%/%pid%``: ``DIR/<hostname>/<pid>_kernel_trace.csv``. No ``-o`` is passed, so every process
  of the application writes its own file and none overwrites another; all of them are read. A domain
  with no record writes no file at all (a counter pass whose filter matched nothing leaves none).
- Kernel names are demangled by default (``-M``/``--mangled-kernels`` turns that off; mangled names end
  in ``.kd``). Neither ``--truncate-kernels`` nor ``--kernel-rename`` is passed: the first cuts the
  arguments off, the second replaces names with ROCTx range names, and the include regex is matched
  against the same formatted name the CSV prints. ``name`` and ``demangled`` are therefore the same.
- The include regex is a C++ ``std::regex`` (ECMAScript) searched in that name; the iteration range is
  counted per kernel from 1, so ``[1]`` is each kernel's first dispatch.
- ``--pmc`` takes counters separated by commas or spaces, and "the job fails if the entire set of
  counters can't be collected in a single pass". The documented ways to more passes are several ``pmc:``
  rows in an input file (rocprofv3 reruns the application once per row, writing ``pmc_<n>/`` folders)
  or ``pmc_groups`` in YAML/JSON, which rotates groups across dispatches and so would not give every
  group the first dispatch. Here each counter group is one rocprofv3 run of its own (the same as the
  input-file rows, with each run's errors and time limit our own); a counter that does not exist on the
  GPU is only a warning to rocprofv3 ("Unable to find all counters"), so a requested counter with no
  value is reported as a ProfileError.
- Each counter_collection.csv row is one counter of one dispatch: rocprofv3 already sums a counter's
  per-dimension instance values into one row. Rows of one dispatch and counter are summed all the same.

Column headers differ between versions; the required ones are in every documented version:
  kernel trace, 2024 (ROCm 6.2): Kind, Agent_Id, Queue_Id, Thread_Id, Dispatch_Id, Kernel_Id,
    Kernel_Name, Correlation_Id, Start_Timestamp, End_Timestamp, Private_Segment_Size,
    Group_Segment_Size, Workgroup_Size_X/Y/Z, Grid_Size_X/Y/Z; 2025-03 adds Stream_Id after Queue_Id;
    2025-05 replaces the two segment sizes by LDS_Block_Size, Scratch_Size, VGPR_Count,
    Accum_VGPR_Count, SGPR_Count.
  counter collection: Correlation_Id, Dispatch_Id, Agent_Id, Queue_Id, Process_Id, Thread_Id,
    Grid_Size, Kernel_Id, Kernel_Name, Workgroup_Size, LDS_Block_Size, Scratch_Size, VGPR_Count,
    [Accum_VGPR_Count, 2025-02], SGPR_Count, Counter_Name, Counter_Value,
    [Start_Timestamp, End_Timestamp, 2024-10].
Timestamps are in nanoseconds.
"""

from __future__ import annotations

import csv
import io
import math
import os
import re
import shlex
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from intelliperf.contract.profile import KernelStats, stats_of
from intelliperf.errors import AppError, ProfileError, tail
from intelliperf.process import describe_exit, run_process, with_jit_cache

__all__ = [
    "COUNTER_COLLECTION",
    "KERNEL_TRACE",
    "KernelResources",
    "KernelTrace",
    "RocprofRun",
    "collect_counters",
    "counter_command",
    "find_output",
    "kernel_name_regex",
    "kernel_trace_command",
    "parse_counters",
    "parse_kernel_resources",
    "parse_kernel_trace",
    "run_rocprof",
    "trace_kernels",
]

KERNEL_TRACE = "kernel_trace.csv"
COUNTER_COLLECTION = "counter_collection.csv"

_CSV = ("--output-format", "csv")
_TRACE_COLUMNS = ("Kernel_Name", "Start_Timestamp", "End_Timestamp")
_COUNTER_COLUMNS = ("Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value")
# Where a column was renamed, the newer name first.
_LDS_COLUMNS = ("LDS_Block_Size", "Group_Segment_Size")
_SCRATCH_COLUMNS = ("Scratch_Size", "Private_Segment_Size")


@dataclass(frozen=True)
class KernelResources:
    """A kernel's resources, from its first dispatch in the kernel trace; None where the version of
    rocprofv3 does not print the column.

    ``lds_bytes`` is LDS_Block_Size (the kernel's static LDS rounded up to the 512-byte allocation
    granularity) or, from versions before it, Group_Segment_Size (not rounded). ``scratch_bytes`` is
    Scratch_Size or Private_Segment_Size (per work-item). Grid sizes count work-items, not workgroups.
    """

    vgpr_count: int | None
    accum_vgpr_count: int | None
    sgpr_count: int | None
    lds_bytes: int | None
    scratch_bytes: int | None
    workgroup_size: tuple[int, int, int] | None
    grid_size: tuple[int, int, int] | None


@dataclass(frozen=True)
class _Dispatch:
    name: str
    dispatch_id: int | None
    start: int
    end: int
    resources: KernelResources


@dataclass(frozen=True)
class RocprofRun:
    """``files`` are the CSV files the run wrote, ``output`` rocprofv3's and the application's output."""

    files: tuple[Path, ...]
    seconds: float
    output: str


@dataclass(frozen=True)
class KernelTrace:
    stats: tuple[KernelStats, ...]
    resources: dict[str, KernelResources]
    wall_s: float


# ----------------------------------------------------------------------------------------------------------
# Commands


def kernel_name_regex(kernel_names: Iterable[str]) -> str:
    """An ECMAScript regex matching exactly the given kernel names (rocprofv3 searches it in the name)."""
    alternatives = "|".join(_escape(name) for name in dict.fromkeys(kernel_names))
    if not alternatives:
        raise ValueError("no kernel name to match")
    return f"^({alternatives})$"


def _escape(name: str) -> str:
    # Only ECMAScript's syntax characters: std::regex rejects no escape of these, and every other
    # character of a demangled name (space, comma, <, >, :, &) is literal as it stands.
    return re.sub(r"[\\^$.*+?()\[\]{}|/]", r"\\\g<0>", name)


def kernel_trace_command(rocprofv3: str, argv: Sequence[str], out_dir: Path) -> list[str]:
    return [rocprofv3, "--kernel-trace", *_CSV, "--output-directory", str(out_dir), "--", *argv]


def counter_command(
    rocprofv3: str,
    argv: Sequence[str],
    out_dir: Path,
    counters: Sequence[str],
    kernel_regex: str,
    *,
    first_dispatch: bool = True,
) -> list[str]:
    """One counter pass: ``counters`` must fit one hardware pass (rocprofv3 fails the job otherwise; see
    the module docstring for more passes). Only kernels whose name ``kernel_regex`` matches are
    profiled, and of each only its first dispatch unless ``first_dispatch`` is False."""
    if not counters:
        raise ValueError("a counter pass needs at least one counter")
    for counter in counters:
        if not counter or re.search(r"[\s,]", counter):
            raise ValueError(f"not a counter name: {counter!r}")
    command = [rocprofv3, "--pmc", ",".join(counters), "--kernel-include-regex", kernel_regex]
    if first_dispatch:
        command += ["--kernel-iteration-range", "[1]"]
    return [*command, *_CSV, "--output-directory", str(out_dir), "--", *argv]


# ----------------------------------------------------------------------------------------------------------
# Output files


def find_output(out_dir: Path, suffix: str) -> list[Path]:
    """Every ``*_<suffix>`` file under ``out_dir`` (``<hostname>/<pid>_<suffix>``, ``pmc_<n>/...``, or a
    name given with -o), in path order; ProfileError when there is none."""
    files = sorted(
        path
        for path in out_dir.rglob(f"*{suffix}")
        if path.is_file() and (path.name == suffix or path.name.endswith(f"_{suffix}"))
    )
    if files:
        return files
    present = sorted(str(p.relative_to(out_dir)) for p in out_dir.rglob("*") if p.is_file())[:10]
    found = f"; it holds: {', '.join(present)}" if present else "; it is empty"
    raise ProfileError(
        f"rocprofv3 wrote no {suffix} under {out_dir} "
        f"(expected {out_dir}/<hostname>/<pid>_{suffix}){found if out_dir.is_dir() else ''}"
    )


def _table(text: str, source: str, required: Sequence[str]) -> list[tuple[int, dict[str, str]]]:
    """The rows of a rocprofv3 CSV file as column -> text, each with its line number."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise ProfileError(f"{source} is empty: no header row")
    header = [column.strip() for column in header]
    for column in required:
        if column not in header:
            raise ProfileError(
                f"{source} has no {column} column (its header: {', '.join(header)})",
                hint="rocprofv3's CSV format may have changed; see intelliperf/gpu/amd/rocprof.py",
            )
    rows = []
    for row in reader:
        if not row or all(not field.strip() for field in row):
            continue
        if len(row) != len(header):
            raise ProfileError(
                f"{source}:{reader.line_num}: {len(row)} fields where the header has {len(header)}"
            )
        rows.append((reader.line_num, dict(zip(header, row, strict=True))))
    return rows


def _int(row: dict[str, str], column: str, where: str) -> int:
    try:
        return int(row[column].strip())
    except ValueError:
        raise ProfileError(f"{where}: {column} is {row[column]!r}, not an integer") from None


def _optional_int(row: dict[str, str], *columns: str) -> int | None:
    for column in columns:
        if column in row:
            try:
                return int(row[column].strip())
            except ValueError:
                return None
    return None


def _triple(row: dict[str, str], prefix: str) -> tuple[int, int, int] | None:
    values = [_optional_int(row, f"{prefix}_{axis}") for axis in "XYZ"]
    if any(value is None for value in values):
        return None
    x, y, z = values
    assert x is not None and y is not None and z is not None
    return (x, y, z)


def _number(text: str) -> float | None:
    """A counter value; None for an empty, non-numeric or non-finite one (never read as 0)."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ----------------------------------------------------------------------------------------------------------
# Kernel trace


def _dispatches(text: str, source: str) -> list[_Dispatch]:
    dispatches = []
    for line, row in _table(text, source, _TRACE_COLUMNS):
        where = f"{source}:{line}"
        start, end = _int(row, "Start_Timestamp", where), _int(row, "End_Timestamp", where)
        if end < start:
            raise ProfileError(f"{where}: End_Timestamp {end} is before Start_Timestamp {start}")
        resources = KernelResources(
            vgpr_count=_optional_int(row, "VGPR_Count"),
            accum_vgpr_count=_optional_int(row, "Accum_VGPR_Count"),
            sgpr_count=_optional_int(row, "SGPR_Count"),
            lds_bytes=_optional_int(row, *_LDS_COLUMNS),
            scratch_bytes=_optional_int(row, *_SCRATCH_COLUMNS),
            workgroup_size=_triple(row, "Workgroup_Size"),
            grid_size=_triple(row, "Grid_Size"),
        )
        dispatch_id = _optional_int(row, "Dispatch_Id")
        dispatches.append(_Dispatch(row["Kernel_Name"], dispatch_id, start, end, resources))
    return dispatches


def _summarize(dispatches: Sequence[_Dispatch]) -> list[KernelStats]:
    durations: dict[str, list[int]] = {}
    for dispatch in dispatches:
        durations.setdefault(dispatch.name, []).append(dispatch.end - dispatch.start)
    return stats_of(durations, {})


def _first_resources(dispatches: Sequence[_Dispatch]) -> dict[str, KernelResources]:
    first: dict[str, _Dispatch] = {}
    for dispatch in dispatches:
        seen = first.get(dispatch.name)
        if seen is None or (dispatch.start, dispatch.dispatch_id or 0) < (seen.start, seen.dispatch_id or 0):
            first[dispatch.name] = dispatch
    return {name: dispatch.resources for name, dispatch in first.items()}


def parse_kernel_trace(text: str, source: str = KERNEL_TRACE) -> list[KernelStats]:
    """Per-kernel statistics of a kernel_trace.csv (End - Start of each dispatch), hottest first."""
    return _summarize(_dispatches(text, source))


def parse_kernel_resources(text: str, source: str = KERNEL_TRACE) -> dict[str, KernelResources]:
    """Each kernel's resource columns, from its first (earliest) dispatch."""
    return _first_resources(_dispatches(text, source))


# ----------------------------------------------------------------------------------------------------------
# Counter collection


def _counter_rows(text: str, source: str) -> dict[str, tuple[int, dict[str, float]]]:
    """Per kernel: the id of its first dispatch in this file and that dispatch's counters."""
    values: dict[tuple[str, int], dict[str, float]] = {}
    for line, row in _table(text, source, _COUNTER_COLUMNS):
        dispatch = _int(row, "Dispatch_Id", f"{source}:{line}")
        counters = values.setdefault((row["Kernel_Name"], dispatch), {})
        value = _number(row["Counter_Value"])
        if value is not None:
            counter = row["Counter_Name"].strip()
            counters[counter] = counters.get(counter, 0.0) + value
    first: dict[str, tuple[int, dict[str, float]]] = {}
    for (name, dispatch), counters in values.items():
        if name not in first or dispatch < first[name][0]:
            first[name] = (dispatch, counters)
    return first


def parse_counters(text: str, source: str = COUNTER_COLLECTION) -> dict[str, dict[str, float]]:
    """Per kernel name, per counter: the value on the kernel's first dispatch (lowest Dispatch_Id).

    Rows of the same dispatch and counter are summed; an empty or non-numeric value is left out."""
    return {name: counters for name, (_, counters) in _counter_rows(text, source).items()}


def _merge_counters(files: Sequence[Path]) -> dict[str, dict[str, float]]:
    """Counters of several files (processes, passes): per kernel, its first file's first dispatch for
    each counter."""
    merged: dict[str, dict[str, float]] = {}
    for path in files:
        for name, counters in parse_counters(path.read_text(errors="replace"), str(path)).items():
            kernel = merged.setdefault(name, {})
            for counter, value in counters.items():
                kernel.setdefault(counter, value)
    return merged


# ----------------------------------------------------------------------------------------------------------
# Running

# rocprofv3's own failures: its launcher's "Fatal error: ..." and ROCprofiler's glog lines of severity
# E or F ("E20250809 01:02:03.456789 1234 tool.cpp:99] ..."), and glog's abort banner.
_TOOL_ERROR = re.compile(
    r"^(Fatal error: "
    r"|[EF]\d{4}(\d{4})? \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\] "
    r"|\*\*\* Check failure stack trace)",
    re.MULTILINE,
)


def _fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def run_rocprof(
    command: Sequence[str], *, cwd: Path, out_dir: Path, suffix: str, timeout_s: float, empty: str
) -> RocprofRun:
    """Run one rocprofv3 command (from kernel_trace_command / counter_command) writing into ``out_dir``.

    rocprofv3 execs the application, so its exit status is the application's: a failure is an AppError
    unless rocprofv3 itself reported an error (ProfileError). A run that ends well but leaves no
    ``*_<suffix>`` file is a ProfileError, ``empty`` saying what that means for this pass.
    FileNotFoundError (no rocprofv3) reaches the caller."""
    argv = list(command[command.index("--") + 1 :]) if "--" in command else list(command)
    result = run_process(command, cwd=cwd, env=with_jit_cache(os.environ, cwd), timeout_s=timeout_s)
    if not result.ok:
        what = describe_exit(result.returncode, result.timed_out, timeout_s)
        if _TOOL_ERROR.search(result.output):
            raise ProfileError(
                f"rocprofv3 {what} while profiling `{shlex.join(argv)}`", log_tail=tail(result.output, 30)
            )
        raise AppError(f"the application {what} under rocprofv3", log_tail=tail(result.output, 30))
    try:
        files = find_output(out_dir, suffix)
    except ProfileError as error:
        raise ProfileError(f"{error.message}: {empty}", log_tail=tail(result.output, 30)) from None
    return RocprofRun(files=tuple(files), seconds=result.seconds, output=result.output)


def trace_kernels(
    rocprofv3: str, argv: Sequence[str], *, cwd: Path, workdir: Path, timeout_s: float
) -> KernelTrace:
    """The timing pass: every dispatch of every process of the application, ranked by total time."""
    out_dir = _fresh(workdir / "rocprof-trace")
    run = run_rocprof(
        kernel_trace_command(rocprofv3, argv, out_dir),
        cwd=cwd,
        out_dir=out_dir,
        suffix=KERNEL_TRACE,
        timeout_s=timeout_s,
        empty="the application launched no GPU kernel, or rocprofv3 could not attach to it",
    )
    dispatches = [d for path in run.files for d in _dispatches(path.read_text(errors="replace"), str(path))]
    return KernelTrace(
        stats=tuple(_summarize(dispatches)), resources=_first_resources(dispatches), wall_s=run.seconds
    )


def collect_counters(
    rocprofv3: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    workdir: Path,
    kernel_names: Sequence[str],
    counter_groups: Sequence[Sequence[str]],
    timeout_s: float,
) -> dict[str, dict[str, float]]:
    """The counter pass: one rocprofv3 run per counter group (each group must fit one hardware pass;
    ``timeout_s`` applies to each run), on the first dispatch of each named kernel. Per kernel name,
    per counter, the value. A requested counter that no kernel has a value of is a ProfileError."""
    regex = kernel_name_regex(kernel_names)
    merged: dict[str, dict[str, float]] = {}
    for number, counters in enumerate(counter_groups, start=1):
        out_dir = _fresh(workdir / f"rocprof-pmc_{number}")
        run = run_rocprof(
            counter_command(rocprofv3, argv, out_dir, counters, regex),
            cwd=cwd,
            out_dir=out_dir,
            suffix=COUNTER_COLLECTION,
            timeout_s=timeout_s,
            empty=f"the kernel filter {regex} matched no dispatch",
        )
        for name, values in _merge_counters(run.files).items():
            merged.setdefault(name, {}).update(values)
        collected = {counter for values in merged.values() for counter in values}
        missing = [counter for counter in counters if counter not in collected]
        if missing:
            warnings = "\n".join(line for line in run.output.splitlines() if "counter" in line.lower())
            raise ProfileError(
                f"rocprofv3 collected no value of {', '.join(missing)} (pass {number})",
                hint="`rocprofv3-avail list --pmc` lists the counters this GPU has",
                log_tail=tail(warnings or run.output, 30),
            )
    return merged

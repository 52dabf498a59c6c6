"""Kernel timing through the native profiler's trace mode: run an application under the tracer, read what it
writes and rank kernels by total GPU time.

The tracer writes, per CUDA process, a kernel table (JSON Lines: a header, one line per kernel, the launch
count) and 64-byte binary launch records beside it (profiler/native/FORMAT.md, version 2), read here in one
array read: a program with tens of thousands of launches costs milliseconds to read, not a second of JSON.
A recording of a timing pass (``read_trace``, ``summarize``) stays JSON Lines of version 1, one object per
launch::

    {"accordo":"trace","version":1,"pid":1234}
    {"corr":7,"name":"_Z5scalePKfPfi","demangled":"scale(float const*, float*, int)","start":...,"end":...,
     "grid":[8,1,1],"block":[128,1,1],"smem":0,"regs":16,"device":0,"stream":7}
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from intelliperf.contract.profile import KernelStats, LaunchShape, shape_hash, stats_of
from intelliperf.errors import AppError, ProfileError, tail
from intelliperf.process import run_process, with_jit_cache

__all__ = [
    "LAUNCH_RECORD",
    "KernelLaunch",
    "LaunchTable",
    "TracedRun",
    "int_field",
    "jsonl_records",
    "jsonl_text_records",
    "read_native_trace",
    "read_trace",
    "run_traced",
    "str_field",
    "summarize",
    "summarize_tables",
    "triple_field",
]

TRACE_VERSION = 1
"""The recording's JSON Lines trace (``read_trace``)."""
NATIVE_TRACE_VERSION = 2
"""The native tracer's kernel table and launch records (``read_native_trace``)."""
LAUNCHES_SUFFIX = ".launches"
CODE_HASH = re.compile(r"[0-9a-f]{16}")
LAUNCH_RECORD = np.dtype(
    [
        ("kernel", "<u4"),
        ("corr", "<u4"),
        ("start", "<u8"),
        ("end", "<u8"),
        ("grid", "<i4", (3,)),
        ("block", "<i4", (3,)),
        ("smem", "<i4"),
        ("regs", "<u4"),
        ("device", "<u4"),
        ("stream", "<u4"),
    ]
)
"""One kernel execution in ``<trace>.launches`` (FORMAT.md)."""
assert LAUNCH_RECORD.itemsize == 64
_SHAPE_KEY = np.dtype([("kernel", "<u4"), ("grid", "<i4", (3,)), ("block", "<i4", (3,)), ("smem", "<i4")])
"""The fields of a record that make a kernel's launch shape."""


@dataclass(frozen=True)
class KernelLaunch:
    corr: int
    name: str
    demangled: str
    start: int
    end: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    regs: int
    device: int
    stream: int

    @property
    def duration_ns(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, eq=False)
class LaunchTable:
    """One CUDA process's native trace: its kernels' names by id and its launch records as read."""

    names: tuple[str, ...]
    demangled: tuple[str, ...]
    records: np.ndarray  # of LAUNCH_RECORD
    # each kernel's code hash (16 hex digits), None where the tracer saw no module holding it
    codes: tuple[str | None, ...]
    # each kernel's launches made with kernel records off (a sampled trace), by id; () where none were
    unrecorded: tuple[int, ...] = ()

    def __len__(self) -> int:
        return len(self.records)

    def durations(self) -> dict[str, list[int]]:
        """Each kernel's launch durations (ns) by mangled name, in record order; kernels never launched
        are left out."""
        ids = self.records["kernel"]
        spans = (self.records["end"] - self.records["start"]).astype(np.int64)
        order = np.argsort(ids, kind="stable")
        bounds = np.searchsorted(ids[order], np.arange(len(self.names) + 1))
        return {
            name: spans[order[bounds[k] : bounds[k + 1]]].tolist()
            for k, name in enumerate(self.names)
            if bounds[k + 1] > bounds[k]
        }

    def shapes(self) -> dict[str, set[LaunchShape]]:
        """Each launched kernel's distinct launch configurations (grid, block, shared memory) by name."""
        records = self.records
        keys = np.empty(len(records), dtype=_SHAPE_KEY)
        for field in _SHAPE_KEY.names:
            keys[field] = records[field]
        found: dict[str, set[LaunchShape]] = {}
        # one sort of fixed-size byte strings (np.unique(axis=0) on the same rows takes 30 times as long),
        # kept where a row differs from the one before: np.unique does the same but imports numpy.ma on
        # its first call, which the first timing pass of a process paid (13 ms with bytecode, 49 without)
        ordered = np.sort(keys.view(np.dtype((np.void, _SHAPE_KEY.itemsize))))
        first = np.ones(len(ordered), dtype=bool)
        first[1:] = ordered[1:] != ordered[:-1]
        distinct = ordered[first].view(_SHAPE_KEY)
        for key in distinct:
            shape = (*key["grid"].tolist(), *key["block"].tolist(), int(key["smem"]))
            found.setdefault(self.names[int(key["kernel"])], set()).add(shape)
        return found

    def launches(self) -> list[KernelLaunch]:
        """Every record as a KernelLaunch (for recordings and tests; ranking needs only ``durations``)."""
        return [
            KernelLaunch(
                corr=int(r["corr"]),
                name=self.names[r["kernel"]],
                demangled=self.demangled[r["kernel"]],
                start=int(r["start"]),
                end=int(r["end"]),
                grid=(int(r["grid"][0]), int(r["grid"][1]), int(r["grid"][2])),
                block=(int(r["block"][0]), int(r["block"][1]), int(r["block"][2])),
                smem=int(r["smem"]),
                regs=int(r["regs"]),
                device=int(r["device"]),
                stream=int(r["stream"]),
            )
            for r in self.records
        ]


@dataclass(frozen=True)
class TracedRun:
    tables: tuple[LaunchTable, ...]  # one per CUDA process
    stats: tuple[KernelStats, ...]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float

    @cached_property
    def launches(self) -> tuple[KernelLaunch, ...]:
        """Every launch of every process, ordered by start time."""
        launches = [launch for table in self.tables for launch in table.launches()]
        launches.sort(key=lambda launch: (launch.start, launch.corr))
        return tuple(launches)


# ----------------------------------------------------------------------------------------------------------
# Reading


def int_field(record: Mapping[str, object], key: str, where: str) -> int:
    value = record.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProfileError(f"{where}: field {key!r} is missing or not an integer")
    return value


def str_field(record: Mapping[str, object], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise ProfileError(f"{where}: field {key!r} is missing or not a string")
    return value


def triple_field(record: Mapping[str, object], key: str, where: str) -> tuple[int, int, int]:
    value = record.get(key)
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        raise ProfileError(f"{where}: field {key!r} is missing or not a list of 3 integers")
    return (value[0], value[1], value[2])


def _launch(record: object, where: str) -> KernelLaunch:
    if not isinstance(record, dict):
        raise ProfileError(f"{where}: expected a JSON object")
    launch = KernelLaunch(
        corr=int_field(record, "corr", where),
        name=str_field(record, "name", where),
        demangled=str_field(record, "demangled", where),
        start=int_field(record, "start", where),
        end=int_field(record, "end", where),
        grid=triple_field(record, "grid", where),
        block=triple_field(record, "block", where),
        smem=int_field(record, "smem", where),
        regs=int_field(record, "regs", where),
        device=int_field(record, "device", where),
        stream=int_field(record, "stream", where),
    )
    if launch.end < launch.start:
        raise ProfileError(f"{where}: end {launch.end} is before start {launch.start}")
    return launch


def jsonl_records(
    path: str | os.PathLike[str], kind: str, version: int
) -> tuple[dict[str, Any], list[tuple[str, object]]]:
    """The header of a native profiler JSON Lines file of ``kind`` ("trace", "time") and the records after it,
    each with its "<path>:<line>" for messages.

    Raises ProfileError when the file is missing, empty, not of that kind, of another version, or has a
    malformed or truncated line.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"the {kind} file {path} does not exist") from None
    except OSError as exc:
        raise ProfileError(f"cannot read the {kind} file {path}: {exc}") from exc
    return jsonl_text_records(data.decode("utf-8", errors="replace"), str(path), kind, version)


def jsonl_text_records(
    text: str, path: str, kind: str, version: int
) -> tuple[dict[str, Any], list[tuple[str, object]]]:
    """``jsonl_records`` of a file's text; ``path`` names it in messages."""
    lines = text.split("\n")
    if not text.strip():
        raise ProfileError(f"the {kind} file {path} is empty")
    try:
        header = json.loads(lines[0])
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("accordo") != kind:
        raise ProfileError(f"{path} is not a profiler {kind} file (its first line is not the {kind} header)")
    if header.get("version") != version:
        raise ProfileError(
            f"{path} is a profiler {kind} file of version {header.get('version')!r}; "
            f"this reader knows {version}"
        )
    if not text.endswith("\n"):
        raise ProfileError(f"the {kind} file {path} is truncated (its last line is incomplete)")
    records = []
    for number, line in enumerate(lines[1:-1], start=2):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            records.append((where, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ProfileError(f"{where}: malformed {kind} line ({exc.msg})") from None
    return header, records


def read_trace(path: str | os.PathLike[str]) -> list[KernelLaunch]:
    """The launches in a profiler trace file, ordered by start time.

    Raises ProfileError when the file is missing, empty, not a profiler trace, of another version, or has a
    malformed or truncated line.
    """
    _, records = jsonl_records(path, "trace", TRACE_VERSION)
    launches = [_launch(record, where) for where, record in records]
    launches.sort(key=lambda launch: (launch.start, launch.corr))
    return launches


def read_native_trace(path: str | os.PathLike[str]) -> LaunchTable:
    """The native tracer's kernel table at ``path`` and the launch records beside it
    (``<path>.launches``).

    Raises ProfileError when either is missing or malformed, when the table's kernel ids are not 0, 1, ...
    in order, when the records are not the number the table's last line gives, or when a record names a
    kernel the table lacks or ends before it starts.
    """
    path = Path(path)
    header, lines = jsonl_records(path, "trace", NATIVE_TRACE_VERSION)
    if header.get("record_bytes") != LAUNCH_RECORD.itemsize:
        raise ProfileError(
            f"{path}: launch records of {header.get('record_bytes')!r} bytes; this reader knows "
            f"{LAUNCH_RECORD.itemsize}"
        )
    closing = lines[-1][1] if lines else None
    if not isinstance(closing, dict) or "launches" not in closing:
        raise ProfileError(f"{path} has no closing line with the launch count; the trace is incomplete")
    count = int_field(closing, "launches", lines[-1][0])
    codes = closing.get("code", [None] * (len(lines) - 1))
    names: list[str] = []
    demangled: list[str] = []
    for where, line in lines[:-1]:
        if not isinstance(line, dict):
            raise ProfileError(f"{where}: expected a JSON object")
        if int_field(line, "kernel", where) != len(names):
            raise ProfileError(f"{where}: kernel id {line['kernel']} where {len(names)} comes next")
        names.append(str_field(line, "name", where))
        demangled.append(str_field(line, "demangled", where))
    if (
        not isinstance(codes, list)
        or len(codes) != len(names)
        or not all(code is None or (isinstance(code, str) and CODE_HASH.fullmatch(code)) for code in codes)
    ):
        raise ProfileError(
            f"{lines[-1][0]}: 'code' is not a list of {len(names)} code hashes (16 hex digits or null)"
        )
    launches_path = Path(f"{path}{LAUNCHES_SUFFIX}")
    try:
        data = launches_path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"the launch records {launches_path} do not exist") from None
    except OSError as exc:
        raise ProfileError(f"cannot read the launch records {launches_path}: {exc}") from exc
    if len(data) != count * LAUNCH_RECORD.itemsize:
        raise ProfileError(
            f"{launches_path} holds {len(data)} bytes where {count} launch records of "
            f"{LAUNCH_RECORD.itemsize} bytes were written"
        )
    records = np.frombuffer(data, dtype=LAUNCH_RECORD)
    if count and int(records["kernel"].max()) >= len(names):
        raise ProfileError(f"{launches_path}: a record names kernel {int(records['kernel'].max())}, "
                           f"the table has {len(names)}")  # fmt: skip
    backwards = np.flatnonzero(records["end"] < records["start"])
    if backwards.size:
        first = int(backwards[0])
        raise ProfileError(f"{launches_path}: record {first} ends at {int(records['end'][first])}, "
                           f"before its start {int(records['start'][first])}")  # fmt: skip
    unrecorded = closing.get("unrecorded", [])
    if not isinstance(unrecorded, list) or (
        unrecorded
        and (
            len(unrecorded) != len(names)
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in unrecorded)
        )
    ):
        raise ProfileError(
            f"{lines[-1][0]}: 'unrecorded' is not a list of {len(names)} launch counts (integers >= 0)"
        )
    if unrecorded:
        recorded = np.bincount(records["kernel"], minlength=len(names))
        without = [names[k] for k, n in enumerate(unrecorded) if n and not recorded[k]]
        if without:
            raise ProfileError(
                f"{lines[-1][0]}: {without[0]} has unrecorded launches and no record to time them by"
            )
    return LaunchTable(
        names=tuple(names),
        demangled=tuple(demangled),
        records=records,
        codes=tuple(codes),
        unrecorded=tuple(unrecorded) if any(unrecorded) else (),
    )


def summarize_tables(tables: Sequence[LaunchTable]) -> list[KernelStats]:
    """Per-kernel statistics over every process's launches (grouped by mangled name), hottest first."""
    durations: dict[str, list[int]] = {}
    demangled: dict[str, str] = {}
    codes: dict[str, str] = {}
    shapes: dict[str, set[LaunchShape]] = {}
    unrecorded: dict[str, int] = {}
    for table in tables:
        for name, extra in zip(table.names, table.unrecorded, strict=False):
            if extra:
                unrecorded[name] = unrecorded.get(name, 0) + extra
        for name, values in table.durations().items():
            durations.setdefault(name, []).extend(values)
        for name, seen in table.shapes().items():
            shapes.setdefault(name, set()).update(seen)
        for name, shown in zip(table.names, table.demangled, strict=True):
            demangled.setdefault(name, shown)
        for name, code in zip(table.names, table.codes, strict=True):
            if code is not None:
                codes.setdefault(name, code)
    shape_hashes = {name: shape_hash(seen) for name, seen in shapes.items()}
    return stats_of(durations, demangled, codes, shape_hashes, unrecorded=unrecorded)


def summarize(launches: Sequence[KernelLaunch]) -> list[KernelStats]:
    """Per-kernel statistics (grouped by mangled name), the kernel with the most total time first."""
    durations: dict[str, list[int]] = {}
    demangled: dict[str, str] = {}
    shapes: dict[str, set[LaunchShape]] = {}
    for launch in launches:
        durations.setdefault(launch.name, []).append(launch.duration_ns)
        demangled.setdefault(launch.name, launch.demangled)
        shapes.setdefault(launch.name, set()).add((*launch.grid, *launch.block, launch.smem))
    return stats_of(durations, demangled, shapes={name: shape_hash(seen) for name, seen in shapes.items()})


# ----------------------------------------------------------------------------------------------------------
# Running an application under the native profiler (shared with accordo.capture)


@dataclass(frozen=True)
class AppRun:
    """How a process ended. ``returncode`` is negative (-signal) when a signal killed it, None on timeout."""

    cmd: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    wall_s: float
    timed_out: bool

    @property
    def signal_name(self) -> str | None:
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    def describe(self, timeout_s: float | None = None) -> str:
        """'<cmd> exited with code 3', '... was killed by SIGSEGV', '... did not finish within 5 s'."""
        shown = shlex.join(self.cmd)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        if self.timed_out:
            limit = f" within {timeout_s:g} s" if timeout_s is not None else ""
            return f"`{shown}` did not finish{limit} and was killed"
        if self.signal_name is not None:
            return f"`{shown}` was killed by {self.signal_name} (exit status {self.returncode})"
        return f"`{shown}` exited with code {self.returncode}"


def run_app(
    cmd: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    timeout_s: float,
) -> AppRun:
    """Run ``cmd`` in its own process group with the full environment ``env`` (Triton's kernel cache moved
    into ``cwd``: ``intelliperf.process.with_jit_cache``); on timeout kill the group.

    Raises AppError when the program or the working directory does not exist or cannot be executed.
    """
    if not cmd:
        raise AppError("no command to run")
    cmd = tuple(str(part) for part in cmd)
    if cwd is not None and not Path(cwd).is_dir():
        raise AppError(f"the working directory {cwd} does not exist")
    try:
        done = run_process(cmd, cwd=cwd, env=with_jit_cache(env, cwd), timeout_s=timeout_s)
    except FileNotFoundError as exc:
        raise AppError(
            f"the program {exc.filename or cmd[0]} does not exist",
            hint="check the command's path (relative paths are resolved against the working directory)",
        ) from exc
    except PermissionError as exc:
        raise AppError(
            f"the program {exc.filename or cmd[0]} cannot be executed (permission denied)",
            hint="is it executable (chmod +x) and not a directory?",
        ) from exc
    except OSError as exc:
        raise AppError(f"cannot start {cmd[0]}: {exc}") from exc
    return AppRun(
        cmd=cmd,
        returncode=None if done.timed_out else done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
        wall_s=done.seconds,
        timed_out=done.timed_out,
    )


SETTINGS_VARIABLE = "INTELLIPERF_PROFILER_SETTINGS"
MESSAGE_PREFIX = "intelliperf-profiler: "  # how the native profiler starts each line it writes to stderr


def injection_env(
    env: Mapping[str, str] | None, library: Path, folder: Path, mode: str, output: Path, **settings: str
) -> dict[str, str]:
    """The current environment, plus ``env``, plus the two variables that load the native profiler:
    ``CUDA_INJECTION64_PATH`` and ``INTELLIPERF_PROFILER_SETTINGS``, the path of a settings file written
    into ``folder`` (``mode``, ``output`` and ``settings``, a ``key=value`` a line: native/config.h).
    Why a file: the environment is then the same in every mode, so a program cannot read from it whether
    it is being captured or timed (accordo/timed_launches.py checks what it does when it can tell).

    Raises ProfileError when a value holds a line break, which a settings line cannot carry."""
    lines = []
    for key, value in {"mode": mode, "output": str(output), **settings}.items():
        if "\n" in value or "\r" in value:
            raise ProfileError(f"the profiler setting {key!r} holds a line break: {value!r}")
        lines.append(f"{key}={value}\n")
    path = Path(folder) / "settings"
    path.write_text("".join(lines), encoding="utf-8")
    merged = dict(os.environ)
    merged.pop(SETTINGS_VARIABLE, None)
    if env:
        merged.update(env)
    merged.update({"CUDA_INJECTION64_PATH": str(library), SETTINGS_VARIABLE: str(path)})
    return merged


def profiler_messages(stderr: str) -> str:
    """The lines the native profiler wrote to the application's stderr."""
    return "\n".join(line for line in stderr.splitlines() if line.startswith(MESSAGE_PREFIX))


NO_EXIT_HANDLERS = (
    "the program exited without running its exit handlers (os._exit, quick_exit, or a CUDA process killed "
    "by its parent)"
)

Record = TypeVar("Record")


@dataclass(frozen=True)
class JsonlModeRun(Generic[Record]):
    """An application run under a native profiler mode that writes one JSON Lines file per CUDA process."""

    app: AppRun
    records: list[Record]  # read from every completed file
    completed: bool  # some process completed its file
    partial: bool  # some process left its file unfinished (no exit handlers ran)


def run_jsonl_mode(
    cmd: Sequence[str],
    mode: str,
    read: Callable[[Path], list[Record]],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None,
    timeout_s: float,
    library: str | os.PathLike[str] | None,
    **extra: str,
) -> JsonlModeRun[Record]:
    """Run ``cmd`` with the native profiler in ``mode`` ("trace", "time", "counters"; ``extra``: more
    settings, profiler/native/config.h), each CUDA process writing ``out-<pid>.jsonl``, and read every
    completed file with ``read``. ``library``
    defaults to ``profiler.build.native_library()``. Raises AppError when the program is missing, exits
    non-zero, is killed by a signal or times out (the whole process group is killed)."""
    if library is None:
        from profiler.build import native_library

        library = native_library()
    with tempfile.TemporaryDirectory(prefix="intelliperf-run-") as tmp:
        out_dir = Path(tmp)
        run_env = injection_env(env, Path(library), out_dir, mode, out_dir / "out-%p.jsonl", **extra)
        app = run_app(cmd, cwd=cwd, env=run_env, timeout_s=timeout_s)
        if app.timed_out or app.returncode != 0:
            raise AppError(app.describe(timeout_s), log_tail=tail(app.stderr) or None)
        complete = sorted(out_dir.glob("out-*.jsonl"))
        partial = any(out_dir.glob("out-*.jsonl.tmp"))
        records = [record for path in complete for record in read(path)]
    return JsonlModeRun(app, records, bool(complete), partial)


def run_traced(
    cmd: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    library: str | os.PathLike[str] | None = None,
    settings: Mapping[str, str] | None = None,
) -> TracedRun:
    """Run ``cmd`` under the tracer and return its kernel launches and per-kernel statistics.

    ``env`` holds variables added to the current environment; ``settings``, more profiler settings
    (``{"stats": "1"}``: profiler/native/config.h). ``library`` defaults to
    ``profiler.build.native_library()``. Raises AppError when the program is missing, exits non-zero, is
    killed by a signal or times out (the whole process group is killed), and ProfileError when it ran
    but no trace was written or no kernel was seen.
    """
    run = run_jsonl_mode(
        cmd, "trace", lambda path: [read_native_trace(path)], cwd=cwd, env=env, timeout_s=timeout_s,
        library=library, **(settings or {}),
    )  # fmt: skip
    tables: list[LaunchTable] = run.records
    notes = profiler_messages(run.app.stderr)
    if not run.completed and run.partial:
        raise ProfileError(f"the trace was not completed: {NO_EXIT_HANDLERS}", log_tail=notes or None)
    if not any(len(table) for table in tables):
        why = (
            "CUDA never loaded the tracer (the program did not initialize CUDA, or no NVIDIA driver "
            "is present)"
            if not run.completed
            else "the program initialized CUDA but launched no kernel"
        )
        raise ProfileError(
            f"no CUDA kernels were traced: {why}",
            log_tail=notes or None,
            hint="run the program with a GPU workload; check that it uses CUDA on this machine",
        )
    return TracedRun(
        tables=tuple(tables),
        stats=tuple(summarize_tables(tables)),
        returncode=0,
        stdout=run.app.stdout,
        stderr=run.app.stderr,
        wall_s=run.app.wall_s,
    )

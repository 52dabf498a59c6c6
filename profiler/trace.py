"""Kernel timing through libaccordo's trace mode: run an application under the tracer, read the
JSON Lines trace it writes and rank kernels by total GPU time.

Trace file (one per CUDA process; written to ``<path>.tmp`` and renamed when complete)::

    {"accordo":"trace","version":1,"pid":1234}
    {"corr":7,"name":"_Z5scalePKfPfi","demangled":"scale(float const*, float*, int)","start":...,"end":...,
     "grid":[8,1,1],"block":[128,1,1],"smem":0,"regs":16,"device":0,"stream":7}
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from intelliperf.contract.profile import KernelStats, stats_of
from intelliperf.errors import AppError, ProfileError, tail
from intelliperf.process import run_process, with_jit_cache

__all__ = [
    "KernelLaunch",
    "TracedRun",
    "int_field",
    "jsonl_records",
    "jsonl_text_records",
    "read_trace",
    "run_traced",
    "str_field",
    "summarize",
    "triple_field",
]

TRACE_VERSION = 1


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


@dataclass(frozen=True)
class TracedRun:
    launches: tuple[KernelLaunch, ...]
    stats: tuple[KernelStats, ...]
    returncode: int
    stdout: str
    stderr: str
    wall_s: float


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
    """The header of a libaccordo JSON Lines file of ``kind`` ("trace", "time") and the records after it,
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
        raise ProfileError(f"{path} is not an Accordo {kind} file (its first line is not the {kind} header)")
    if header.get("version") != version:
        raise ProfileError(
            f"{path} is an Accordo {kind} file of version {header.get('version')!r}; "
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
    """The launches in an Accordo trace file, ordered by start time.

    Raises ProfileError when the file is missing, empty, not an Accordo trace, of another version, or has a
    malformed or truncated line.
    """
    _, records = jsonl_records(path, "trace", TRACE_VERSION)
    launches = [_launch(record, where) for where, record in records]
    launches.sort(key=lambda launch: (launch.start, launch.corr))
    return launches


def summarize(launches: Sequence[KernelLaunch]) -> list[KernelStats]:
    """Per-kernel statistics (grouped by mangled name), the kernel with the most total time first."""
    durations: dict[str, list[int]] = {}
    demangled: dict[str, str] = {}
    for launch in launches:
        durations.setdefault(launch.name, []).append(launch.duration_ns)
        demangled.setdefault(launch.name, launch.demangled)
    return stats_of(durations, demangled)


# ----------------------------------------------------------------------------------------------------------
# Running an application under libaccordo (shared with accordo.capture)


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


def injection_env(
    env: Mapping[str, str] | None, library: Path, mode: str, output: Path, **extra: str
) -> dict[str, str]:
    """The current environment, plus ``env``, plus the variables that activate libaccordo."""
    merged = dict(os.environ)
    if env:
        merged.update(env)
    merged.update(
        CUDA_INJECTION64_PATH=str(library),
        ACCORDO_MODE=mode,
        ACCORDO_OUTPUT=str(output),
        **extra,
    )
    return merged


def accordo_messages(stderr: str) -> str:
    """The lines libaccordo wrote to the application's stderr."""
    return "\n".join(line for line in stderr.splitlines() if line.startswith("accordo: "))


NO_EXIT_HANDLERS = (
    "the program exited without running its exit handlers (os._exit, quick_exit, or a CUDA process killed "
    "by its parent)"
)

Record = TypeVar("Record")


@dataclass(frozen=True)
class JsonlModeRun(Generic[Record]):
    """An application run under a libaccordo mode that writes one JSON Lines file per CUDA process."""

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
    """Run ``cmd`` with libaccordo in ``mode`` ("trace", "time"; ``extra``: more ACCORDO_* variables), each
    CUDA process writing ``<mode>-<pid>.jsonl``, and read every completed file with ``read``. ``library``
    defaults to ``profiler.build.native_library()``. Raises AppError when the program is missing, exits
    non-zero, is killed by a signal or times out (the whole process group is killed)."""
    if library is None:
        from profiler.build import native_library

        library = native_library()
    with tempfile.TemporaryDirectory(prefix=f"accordo-{mode}-") as tmp:
        out_dir = Path(tmp)
        run_env = injection_env(env, Path(library), mode, out_dir / f"{mode}-%p.jsonl", **extra)
        app = run_app(cmd, cwd=cwd, env=run_env, timeout_s=timeout_s)
        if app.timed_out or app.returncode != 0:
            raise AppError(app.describe(timeout_s), log_tail=tail(app.stderr) or None)
        complete = sorted(out_dir.glob(f"{mode}-*.jsonl"))
        partial = any(out_dir.glob(f"{mode}-*.jsonl.tmp"))
        records = [record for path in complete for record in read(path)]
    return JsonlModeRun(app, records, bool(complete), partial)


def run_traced(
    cmd: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    library: str | os.PathLike[str] | None = None,
) -> TracedRun:
    """Run ``cmd`` under the Accordo tracer and return its kernel launches and per-kernel statistics.

    ``env`` holds variables added to the current environment. ``library`` defaults to
    ``profiler.build.native_library()``. Raises AppError when the program is missing, exits non-zero, is
    killed by a signal or times out (the whole process group is killed), and ProfileError when it ran
    but no trace was written or no kernel was seen.
    """
    run = run_jsonl_mode(cmd, "trace", read_trace, cwd=cwd, env=env, timeout_s=timeout_s, library=library)
    launches: list[KernelLaunch] = run.records
    notes = accordo_messages(run.app.stderr)
    if not run.completed and run.partial:
        raise ProfileError(f"the trace was not completed: {NO_EXIT_HANDLERS}", log_tail=notes or None)
    if not launches:
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
    launches.sort(key=lambda launch: (launch.start, launch.corr))
    return TracedRun(
        launches=tuple(launches),
        stats=tuple(summarize(launches)),
        returncode=0,
        stdout=run.app.stdout,
        stderr=run.app.stderr,
        wall_s=run.app.wall_s,
    )

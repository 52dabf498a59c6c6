"""The NVIDIA counter pass: the native profiler's counters mode (CUPTI's range profiler and SASS metrics) run
inside the application, one run in most cases.

For each top kernel: its kernel-level metrics on its first launch (every replay pass CUPTI needs is run on
that launch, memory restored between passes, as Nsight Compute's kernel replay does), and its
per-instruction SASS metrics on its second launch (the launch's code patched to count). A kernel launched
only once gets its SASS metrics in a second run that counts only those, on their first launch. The cubin
of every module that holds a top kernel is saved and disassembled (`sass_listing`) for the instructions'
text and source lines. Why not Nsight Compute: the same counters took 2.0-3.8 s for a 0.3-0.4 s
application there, most of it ncu's own start, report and replay set-up
(`python -m benchmarks.counter_pass --against-ncu`).

File format: ``profiler/native/FORMAT.md`` (counters mode).
"""

from __future__ import annotations

import fcntl
import os
import re
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from intelliperf.contract import RankedKernel
from intelliperf.errors import ProfileError
from profiler.trace import int_field, jsonl_text_records, profiler_messages, run_jsonl_mode, triple_field

__all__ = [
    "COUNTERS_VERSION",
    "CounterRecords",
    "KernelCounters",
    "LaunchFacts",
    "SassCounts",
    "counter_notes",
    "counter_pass_lock",
    "environment_problem",
    "parse_counters",
    "run_counters",
]

COUNTERS_VERSION = 1


@dataclass(frozen=True)
class LaunchFacts:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int
    static_shared: int
    dynamic_shared: int
    local_bytes: int


@dataclass(frozen=True)
class SassCounts:
    """Per-instruction counts of one launch: each SASS metric's count at each pc offset (``pcs``)."""

    cubin: int
    pcs: tuple[int, ...]
    counts: Mapping[str, tuple[int, ...]]

    def at(self, index: int) -> dict[str, float]:
        return {name: float(values[index]) for name, values in self.counts.items()}


@dataclass
class KernelCounters:
    name: str
    demangled: str = ""
    launch: LaunchFacts | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    sass: SassCounts | None = None
    launches: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class CounterRecords:
    """What the counters runs of one application wrote, every process's file merged."""

    device: dict[str, int] = field(default_factory=dict)
    chip: str = ""
    passes: int | None = None
    metrics: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    sass_metrics: list[str] = field(default_factory=list)
    kernels: dict[str, KernelCounters] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    cubins: set[int] = field(default_factory=set)

    def kernel(self, name: str) -> KernelCounters:
        return self.kernels.setdefault(name, KernelCounters(name=name))

    def only_launched_once(self) -> list[str]:
        """Kernels with no SASS counts because the run never reached their second launch."""
        return [k.name for k in self.kernels.values() if k.sass is None and k.launches == 1]


def _ints(value: object, where: str, key: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ProfileError(f"{where}: field {key!r} is not a list of integers")
    return tuple(value)


def _strings(value: object, where: str, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ProfileError(f"{where}: field {key!r} is not a list of strings")
    return list(value)


def _merged(unsupported: list[str], record: Mapping[str, object], where: str) -> list[str]:
    return sorted({*unsupported, *_strings(record.get("unsupported", []), where, "unsupported")})


def _add(records: CounterRecords, record: object, where: str) -> None:
    if not isinstance(record, dict):
        raise ProfileError(f"{where}: expected a JSON object")
    if "error" in record:
        kernel = record.get("kernel")
        message = f"{record.get('stage', 'counters')}: {record['error']}"
        if isinstance(kernel, str):
            records.kernel(kernel).problems.append(message)
        else:
            records.errors.append(message)
    elif "device" in record:
        records.device = {key: value for key, value in record.items() if isinstance(value, int)}
    elif "metrics" in record and "kernel" not in record:
        records.metrics = _strings(record["metrics"], where, "metrics")
        records.unsupported = _merged(records.unsupported, record, where)
        records.chip = str(record.get("chip", ""))
        passes = record.get("passes")
        records.passes = passes if isinstance(passes, int) else None
    elif "sass_metrics" in record:
        records.sass_metrics = _strings(record["sass_metrics"], where, "sass_metrics")
        records.unsupported = _merged(records.unsupported, record, where)
    elif "cubin" in record and "kernel" not in record:
        records.cubins.add(int_field(record, "cubin", where))
    elif "kernel" in record:
        _add_kernel(records.kernel(str(record["kernel"])), record, where)
    elif record.get("end") is not True:
        raise ProfileError(f"{where}: not a counters record")


def _add_kernel(kernel: KernelCounters, record: Mapping[str, object], where: str) -> None:
    if "grid" in record:
        kernel.demangled = str(record.get("demangled", kernel.name))
        kernel.launch = LaunchFacts(
            grid=triple_field(record, "grid", where),
            block=triple_field(record, "block", where),
            registers=int_field(record, "registers", where),
            static_shared=int_field(record, "static_shared", where),
            dynamic_shared=int_field(record, "dynamic_shared", where),
            local_bytes=int_field(record, "local_bytes", where),
        )
    elif "metrics" in record:
        values = record["metrics"]
        if not isinstance(values, dict):
            raise ProfileError(f"{where}: field 'metrics' is not an object")
        # null: a value CUPTI could not evaluate (NaN); absent, never 0
        kernel.metrics = {name: float(v) for name, v in values.items() if isinstance(v, int | float)}
    elif "pc" in record:
        pcs = _ints(record["pc"], where, "pc")
        counts = record.get("counts")
        if not isinstance(counts, dict):
            raise ProfileError(f"{where}: field 'counts' is not an object")
        columns = {name: _ints(values, where, f"counts.{name}") for name, values in counts.items()}
        if any(len(values) != len(pcs) for values in columns.values()):
            raise ProfileError(f"{where}: a SASS metric has not one count per pc")
        kernel.sass = SassCounts(cubin=int_field(record, "cubin", where), pcs=pcs, counts=columns)
    elif "launches" in record:
        kernel.launches = max(kernel.launches, int_field(record, "launches", where))
    else:
        raise ProfileError(f"{where}: not a counters record of kernel {kernel.name}")


def parse_counters(texts: Sequence[str], records: CounterRecords | None = None) -> CounterRecords:
    """Every counters file of an application's runs (their texts), merged into ``records`` (what earlier
    runs gave) or a new one."""
    records = records if records is not None else CounterRecords()
    for index, text in enumerate(texts):
        _, lines = jsonl_text_records(text, f"counters file {index + 1}", "counters", COUNTERS_VERSION)
        for where, record in lines:
            _add(records, record, where)
    return records


@contextmanager
def counter_pass_lock() -> Iterator[None]:
    """Held while the application runs in counters mode: one profiler at a time may program a GPU's
    performance monitors (two range-profiler sessions on one GPU fail), so counter passes of processes that
    see the same GPUs (the same CUDA_VISIBLE_DEVICES) wait for each other. Nsight Compute takes a lock of
    its own; a program that runs it beside the counter pass should hold this one around it."""
    visible = re.sub(r"[^A-Za-z0-9_.-]", "_", os.environ.get("CUDA_VISIBLE_DEVICES", "all")) or "none"
    folder = Path("/tmp") if os.access("/tmp", os.W_OK) else Path(tempfile.gettempdir())
    with open(folder / f"intelliperf-counter-pass-{visible}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def run_counters(
    argv: Sequence[str],
    *,
    cwd: Path,
    kernels: Sequence[str],
    metrics: Sequence[str],
    sass_metrics: Sequence[str],
    cubin_dir: Path,
    timeout_s: float,
    metrics_launch: int = 1,
    sass_launch: int = 2,
) -> list[str]:
    """Run the application once in counters mode; the text of every counters file its processes wrote
    (cubins land in ``cubin_dir``). Raises AppError where the application fails and ProfileError where no
    process completed its file."""
    if any("," in name for name in [*kernels, *metrics, *sass_metrics]):
        raise ProfileError("a kernel or metric name holds a comma, which the counters mode cannot be given")
    run = run_jsonl_mode(
        argv,
        "counters",
        lambda path: [path.read_text()],
        cwd=cwd,
        env=None,
        timeout_s=timeout_s,
        library=None,
        kernels=",".join(kernels),
        metrics=",".join(metrics),
        sass_metrics=",".join(sass_metrics),
        metrics_launch=str(metrics_launch),
        sass_launch=str(sass_launch),
        cubin_dir=str(cubin_dir),
    )
    if not run.completed:
        notes = profiler_messages(run.app.stderr)
        why = "a process ended without its exit handlers" if run.partial else "CUDA never loaded the library"
        raise ProfileError(f"the counter pass wrote no counters: {why}", log_tail=notes or None)
    return run.records


def environment_problem(records: CounterRecords) -> str | None:
    """Why no kernel got any counter, where a problem of the run (CUPTI's profiler unavailable, say) is
    the reason; None where some kernel has counters."""
    if any(k.metrics or k.sass for k in records.kernels.values()):
        return None
    return "; ".join(records.errors) or None


def counter_notes(records: CounterRecords, kernels: Sequence[RankedKernel]) -> list[str]:
    """What the counter pass could not count, one line each: a kernel without counters or without
    per-instruction counts, and why. (A metric the device lacks is not one: the table reads an alternative
    where there is one, and a formula that needs a missing quantity says it could not decide.)"""
    notes = []
    for kernel in kernels:
        counted = records.kernels.get(kernel.name)
        problems = "; ".join(counted.problems) if counted is not None else ""
        if counted is None or counted.launches == 0:
            notes.append(f"{kernel.demangled}: not launched in the counter pass, so not counted")
        elif not counted.metrics:
            notes.append(f"{kernel.demangled}: no kernel-level counters ({problems or 'not profiled'})")
        elif counted.sass is None:
            notes.append(f"{kernel.demangled}: no per-instruction counts ({problems or 'not profiled'})")
    return notes

"""What reading a timing pass's trace costs (CPU): the recorded trace of 72,000 launches
(tests/fixtures/trace_72k) read and ranked by the native trace reader (format 2: kernel table and binary
launch records) and, side by side in the same run, the same launches as JSON Lines (format 1, what the
tracer wrote until 2026-11-28, and what a recording still holds) read by ``read_trace`` and ranked by
``summarize``. Per reader: the median and the spread of ``--rounds`` timed reads, and the peak of memory
allocated while reading (tracemalloc, a read of its own).

    python -m benchmarks.trace_reader [--rounds 7] [--out benchmarks/results/trace_reader.json]
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from intelliperf.gpu.nvidia.backend import write_trace
from profiler.trace import read_native_trace, read_trace, summarize, summarize_tables

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "trace_72k"


def recorded_trace(into: Path) -> Path:
    """The recorded trace's kernel table, copied into ``into`` with its launch records decompressed beside
    it (they are kept xz-compressed in the repository)."""
    table = into / "trace-842.jsonl"
    shutil.copyfile(FIXTURE / table.name, table)
    compressed = (FIXTURE / f"{table.name}.launches.xz").read_bytes()
    Path(f"{table}.launches").write_bytes(lzma.decompress(compressed))
    return table


def measure(read: Callable[[], object], rounds: int) -> dict:
    read()  # the page cache
    seconds = []
    for _ in range(rounds):
        began = time.perf_counter()
        read()
        seconds.append(time.perf_counter() - began)
    tracemalloc.start()
    try:
        read()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return {
        "median_ms": round(statistics.median(seconds) * 1e3, 2),
        "min_ms": round(min(seconds) * 1e3, 2),
        "max_ms": round(max(seconds) * 1e3, 2),
        "peak_mib": round(peak / 2**20, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "trace_reader.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trace-reader-") as tmp:
        native = recorded_trace(Path(tmp))
        table = read_native_trace(native)
        jsonl = Path(tmp) / "trace.jsonl"
        write_trace(table.launches(), jsonl)
        rows = {
            "native (format 2)": measure(lambda: summarize_tables([read_native_trace(native)]), args.rounds),
            "JSON Lines (format 1)": measure(lambda: summarize(read_trace(jsonl)), args.rounds),
        }
        sizes = {"native": native.stat().st_size + Path(f"{native}.launches").stat().st_size,
                 "jsonl": jsonl.stat().st_size}  # fmt: skip
    print(f"{len(table):,} launches, {len(table.names)} kernels; {args.rounds} rounds")
    print(f"{'reader':24} {'median ms':>10} {'min':>8} {'max':>8} {'peak MiB':>9}")
    for name, row in rows.items():
        cells = f"{row['median_ms']:10.1f} {row['min_ms']:8.1f} {row['max_ms']:8.1f} {row['peak_mib']:9.1f}"
        print(f"{name:24} {cells}")
    ratio = rows["JSON Lines (format 1)"]["median_ms"] / rows["native (format 2)"]["median_ms"]
    print(f"JSON Lines / native: {ratio:.0f}x")
    result = {
        "host": f"{platform.node()} ({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs)",
        "python": platform.python_version(),
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "launches": len(table),
        "bytes": sizes,
        "rounds": args.rounds,
        "readers": rows,
        "json_over_native": round(ratio, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

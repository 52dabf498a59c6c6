"""Nsight Compute's counter pass and the reader of its raw page: how the counter pass ran until 2026-11-27
(it now runs CUPTI inside the application, `intelliperf.gpu.nvidia.cupti_counters`). Kept, out of the
product, as the reference the CUPTI pass is measured against (`benchmarks/counter_pass.py --against-ncu`,
tests/test_gpu_counters.py, tests/test_gpu_ncu_pages.py) and to read the pages recorded with it
(`benchmarks.ncu.profiles`); the replay reads CUPTI recordings only.

One ncu run per application profiles the first launch of every top kernel with the formulas'
metrics plus our own source section (sections/IntelliPerfSource.section: the per-instruction
counters the formulas read, attributed to source lines through -lineinfo).
`--clock-control none` always: the card's clocks are never touched.

What each choice saved, measured on an H100 with ncu 2025.3.1 (`benchmarks/counter_pass.py`):
- the source page (CUDA lines with their SASS instructions and every per-instruction counter) is
  printed by the profiling run itself into ncu's log file: about 0.1 s, where exporting it from the
  report afterwards took 1.3 to 1.6 s;
- `--section-folder` names our folder of one section, so ncu loads neither the sections nor the
  rule scripts it ships, and `--apply-rules no`: together 0.3 to 0.5 s per run;
- the raw page (kernel-level metrics) is read from the report by ncu's own Python report reader
  (raw_page.py), only the metrics asked for: 0.20 s for tile_sums' 8 kernels, 0.28 s reading every
  metric, where ncu's export took 0.56 to 0.69 s; the export stays for an ncu installed without that
  reader;
- nothing that no formula decides from: no warp-stall sampling (its own replay pass), no
  kernel-level counters that repeat the section's columns or that the section's columns give (SASS-patched
  counters, L1 bytes per memory space), no cache hit rates (intelliperf/gpu/nvidia/metrics.py): 4 replay
  passes per kernel, was 11.
The SASS-only page is exported only when some kernel has no line info, since the source page leaves
such kernels out.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from intelliperf.errors import AppError, ProfileError, tail
from intelliperf.process import describe_exit, run_process, with_jit_cache

__all__ = [
    "EXPORTS",
    "LOG_FILE",
    "RAW_PAGE",
    "SASS_PAGE",
    "NcuRun",
    "RawKernel",
    "csv_rows",
    "export_page",
    "kernel_id_filter",
    "parse_number",
    "parse_raw_csv",
    "profile_command",
    "read_raw_page",
    "report_reader_dir",
    "run_ncu",
]

SOURCE_SECTION = "IntelliPerfSource"
SECTION_FOLDER = Path(__file__).with_name("sections")
RAW_PAGE_READER = Path(__file__).with_name("raw_page.py")

# Kernels are named by their mangled names on every page, the one form the tracer and ncu print alike.
_MANGLED = ("--print-kernel-base", "mangled")
SOURCE_PAGE = ("--page", "source", "--print-source", "cuda,sass", "--csv", *_MANGLED)
LOG_FILE = "source_cuda_sass.csv"
"""The profiling run's log (ncu's messages and the SOURCE_PAGE it printed), as a recording names it."""

RAW_PAGE = "raw.csv"
SASS_PAGE = "source_sass.csv"
"""Exported only when some kernel has no line info; a recording may lack it."""

# The pages exported from the report afterwards, by the file name a recorded profile keeps them under.
EXPORTS = {
    RAW_PAGE: ("raw", "--print-units", "base", *_MANGLED),
    SASS_PAGE: ("source", "--print-source", "sass", *_MANGLED),
}


@dataclass(frozen=True)
class NcuRun:
    """``log`` is ncu's log file: its messages and the source page it printed."""

    report: Path
    seconds: float
    log: str


def kernel_id_filter(kernel_names: Sequence[str], invocation: int = 1) -> list[str]:
    """Profile the given invocation of each kernel, matched exactly by its mangled name.

    Seen on ncu 2025.3: `--kernel-id ::regex:^(a|b)$:1` profiles the first launch of each of a and b.
    """
    alternatives = "|".join(re.escape(name) for name in dict.fromkeys(kernel_names))
    return ["--kernel-name-base", "mangled", "--kernel-id", f"::regex:^({alternatives})$:{invocation}"]


def profile_command(
    ncu: str,
    argv: Sequence[str],
    *,
    kernel_names: Sequence[str],
    metrics: Sequence[str],
    report: Path,
    log: Path,
) -> list[str]:
    """ncu's own output (messages and the source page) goes to ``log``, so the application's stdout can
    never be read as a page."""
    return [
        ncu,
        "--clock-control",
        "none",
        *kernel_id_filter(kernel_names),
        "--metrics",
        ",".join(metrics),
        "--section-folder",
        str(SECTION_FOLDER),
        "--section",
        SOURCE_SECTION,
        "--apply-rules",
        "no",
        "--import-source",
        "yes",
        *SOURCE_PAGE,
        "--log-file",
        str(log),
        "--export",
        str(report),
        "--force-overwrite",
        *argv,
    ]


def run_ncu(
    ncu: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    kernel_names: Sequence[str],
    metrics: Sequence[str],
    workdir: Path,
    timeout_s: float,
) -> NcuRun:
    report, log_file = workdir / "profile.ncu-rep", workdir / "ncu.log"
    command = profile_command(
        ncu, argv, kernel_names=kernel_names, metrics=metrics, report=report, log=log_file
    )
    result = run_process(command, cwd=cwd, env=with_jit_cache(os.environ, cwd), timeout_s=timeout_s)
    log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    messages = result.output + "\n" + "\n".join(line for line in log.splitlines() if line.startswith("=="))
    if result.timed_out or result.returncode != 0:
        what = describe_exit(result.returncode, result.timed_out, timeout_s)
        if "==ERROR==" in messages or not report.exists():
            raise ProfileError(
                f"Nsight Compute {what} while profiling `{' '.join(argv)}`", log_tail=tail(messages, 30)
            )
        raise AppError(f"the application {what} under Nsight Compute", log_tail=tail(messages, 30))
    if not report.exists():
        raise ProfileError(
            "Nsight Compute profiled no kernel: the kernel filter matched no launch",
            log_tail=tail(messages, 30),
        )
    return NcuRun(report=report, seconds=result.seconds, log=log)


def export_page(ncu: str, report: Path, page: str, *extra: str, timeout_s: float = 300) -> str:
    result = run_process(
        [ncu, "--import", str(report), "--page", page, "--csv", *extra],
        cwd=report.parent,
        timeout_s=timeout_s,
    )
    if not result.ok:
        raise ProfileError(
            f"exporting the {page} page of {report.name} failed: {describe_exit(result.returncode)}",
            log_tail=tail(result.output),
        )
    return result.stdout


def report_reader_dir(ncu: str, *, opt: Path = Path("/opt/nvidia/nsight-compute")) -> Path | None:
    """The folder of ncu's Python report reader (`<install>/extras/python/ncu_report.py`), if present.

    `ncu` may be Nsight Compute itself or the CUDA toolkit's `bin/ncu` wrapper script, which runs the
    newest of `/opt/nvidia/nsight-compute/<version>` and `<toolkit>/nsight-compute-<version>`: the same
    installation is looked for here."""
    found = shutil.which(ncu)
    if found is None:
        return None
    binary = Path(found).resolve()
    candidates = [binary.parent]
    versions = [*opt.glob("*"), *binary.parent.parent.glob("nsight-compute-*")]
    candidates += sorted(versions, key=lambda path: _version(path.name.removeprefix("nsight-compute-")))[::-1]
    for install in candidates:
        folder = install / "extras" / "python"
        if (folder / "ncu_report.py").is_file():
            return folder
    return None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def read_raw_page(
    ncu: str, report: Path, *, metrics: Sequence[str] | None = None, timeout_s: float = 300
) -> str:
    """The raw page of ``report`` as CSV: read with ncu's report reader (only ``metrics``, if given), else
    exported by ncu (every metric)."""
    reader = report_reader_dir(ncu)
    if reader is None:
        return export_page(ncu, report, *EXPORTS[RAW_PAGE], timeout_s=timeout_s)
    wanted = [",".join(metrics)] if metrics is not None else []
    result = run_process(
        [sys.executable, "-I", str(RAW_PAGE_READER), str(report), str(reader), *wanted],
        cwd=report.parent,
        timeout_s=timeout_s,
    )
    if not result.ok:
        raise ProfileError(
            f"reading the raw page of {report.name} with {reader / 'ncu_report.py'} failed: "
            f"{describe_exit(result.returncode, result.timed_out, timeout_s)}",
            log_tail=tail(result.output),
        )
    return result.stdout


def csv_rows(text: str) -> list[list[str]]:
    lines = [line for line in text.splitlines() if line.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def parse_number(text: str) -> float | None:
    cleaned = text.replace(",", "").strip()
    if cleaned in ("", "n/a", "N/A", "-"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


# ncu scales units unless told --print-units base; normalise whatever arrives to base units.
_SCALE = {
    "ns": ("ns", 1.0),
    "us": ("ns", 1e3),
    "usecond": ("ns", 1e3),
    "ms": ("ns", 1e6),
    "msecond": ("ns", 1e6),
    "s": ("ns", 1e9),
    "second": ("ns", 1e9),
    "nsecond": ("ns", 1.0),
    "byte": ("byte", 1.0),
    "Kbyte": ("byte", 1e3),
    "Mbyte": ("byte", 1e6),
    "Gbyte": ("byte", 1e9),
    "Tbyte": ("byte", 1e12),
}


def to_base_unit(value: float, unit: str) -> float:
    return value * _SCALE.get(unit, ("", 1.0))[1]


@dataclass(frozen=True)
class RawKernel:
    """One profiled launch from the raw page: its kernel name and every numeric metric."""

    name: str
    metrics: dict[str, float]
    text: dict[str, str]


def parse_raw_csv(text: str) -> list[RawKernel]:
    """The raw page: a header row of metric names, a row of units, then one row per profiled launch."""
    rows = csv_rows(text)
    if len(rows) < 3 or "Kernel Name" not in rows[0]:
        raise ProfileError("the ncu raw page has no profiled kernel in it", log_tail=tail(text))
    header, units, body = rows[0], rows[1], rows[2:]
    kernels = []
    for row in body:
        metrics: dict[str, float] = {}
        text_values: dict[str, str] = {}
        for name, unit, value in zip(header, units, row, strict=False):
            number = parse_number(value)
            if number is None:
                text_values[name] = value
            else:
                metrics[name] = to_base_unit(number, unit)
        kernels.append(RawKernel(name=row[header.index("Kernel Name")], metrics=metrics, text=text_values))
    return kernels

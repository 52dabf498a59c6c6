"""On the GPU: the ncu counter pass's pages from one real report, as benchmarks/ncu reads them.

The raw page read with ncu's report reader agrees with ncu's own export of the same report (and read for
only the counter pass's metrics, with the values of the full read), and the source
page our section makes the profiling run print has the columns the formulas read, for each of the eight
instantiations of tile_sums' template kernel (kernels named by their mangled names). tile_sums has no
shared-memory access, and ncu leaves out a column no instruction contributes to, so the shared-memory
columns are proven by the bank-conflict examples' diagnoses (tests/test_gpu_diagnose.py), not here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from benchmarks.ncu.pages import (
    EXPORTS,
    RAW_PAGE,
    export_page,
    parse_raw_csv,
    read_raw_page,
    report_reader_dir,
    run_ncu,
)
from benchmarks.ncu.profiles import DEVICE_METRICS
from benchmarks.ncu.source import COLUMNS, parse_cuda_sass_view
from formulas.selection import formulas_for, metrics_for
from intelliperf.contract.profile import Column
from intelliperf.engine.diagnose import targets_of
from intelliperf.gpu.backend import rank_kernels
from intelliperf.gpu.nvidia.cupti_counters import counter_pass_lock
from intelliperf.gpu.nvidia.metrics import kernel_metrics
from profiler.trace import run_traced

pytestmark = pytest.mark.gpu

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tile_sums"
LABELS = {column: label for label, column in COLUMNS.items()}
WANTED = (
    Column.EXECUTED,
    Column.THREADS_EXECUTED,
    Column.GLOBAL_SECTORS_EXCESS,
    Column.GLOBAL_SECTORS,
    Column.GLOBAL_SECTORS_IDEAL,
)


def test_pages_of_one_report(tmp_path: Path) -> None:
    subprocess.run(["make", "-C", str(EXAMPLE), "-s"], check=True)
    argv = ["./bin/tile_sums"]
    names = [k.name for k in targets_of(rank_kernels(run_traced(argv, cwd=EXAMPLE, timeout_s=300).stats), 10)]
    assert len(names) >= 8
    metrics = kernel_metrics(metrics_for(formulas_for("auto")), "sm_90")
    with counter_pass_lock():  # ncu and the counter passes of tests running beside this one take turns
        run = run_ncu(
            "ncu",
            argv,
            cwd=EXAMPLE,
            kernel_names=names,
            metrics=metrics,
            workdir=tmp_path,
            timeout_s=300,
        )
    assert report_reader_dir("ncu") is not None, (
        "ncu's report reader (extras/python/ncu_report.py) is missing"
    )
    read = parse_raw_csv(read_raw_page("ncu", run.report))
    # what the counter pass reads: only its metrics and the device's facts, each as the full read gives it
    asked = [*metrics, *DEVICE_METRICS, "dram__no_such_metric.sum"]
    slim = read_raw_page("ncu", run.report, metrics=asked)
    assert slim.splitlines()[0] == ",".join(f'"{name}"' for name in ["ID", "Kernel Name", *asked])
    for mine, full in zip(parse_raw_csv(slim), read, strict=True):
        assert mine.name == full.name
        assert mine.text["dram__no_such_metric.sum"] == "n/a"
        for name in [*metrics, *DEVICE_METRICS]:
            assert mine.metrics.get(name) == full.metrics.get(name), (mine.name, name)
            if name not in mine.metrics:  # ncu has no value (ATOMG on sm_90): n/a, never a number
                assert mine.text[name] == "n/a", (mine.name, name)
        assert mine.metrics[DEVICE_METRICS[0]] > 0
    exported = parse_raw_csv(export_page("ncu", run.report, *EXPORTS[RAW_PAGE]))
    assert sorted(k.name for k in read) == sorted(names)
    assert [k.name for k in read] == [k.name for k in exported]
    for mine, theirs in zip(read, exported, strict=True):
        numeric = {name: value for name, value in theirs.metrics.items() if name in mine.metrics}
        assert len(numeric) > 100
        for name, value in numeric.items():
            assert mine.metrics[name] == pytest.approx(value, rel=1e-3, abs=0.006), (mine.name, name)
    views = parse_cuda_sass_view(run.log)
    assert set(names) <= set(views)
    header = next(line for line in run.log.splitlines() if line.startswith('"Line No"'))
    for column in WANTED:
        assert f'"{LABELS[column]}"' in header, column

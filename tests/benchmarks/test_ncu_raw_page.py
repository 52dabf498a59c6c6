"""The raw page read with ncu's report reader: its layout, its fallback, and its agreement with ncu's export.

ncu_report (the reader ncu ships in extras/python) cannot run here, so a small module with its interface
stands in for it where the reader's logic is tested; the agreement test uses pages recorded on an H100
from one report, read both ways (tests/fixtures/gpu/raw_page_reader).
"""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path

import pytest

from benchmarks.ncu.pages import (
    RAW_PAGE_READER,
    SECTION_FOLDER,
    SOURCE_SECTION,
    parse_raw_csv,
    profile_command,
    read_raw_page,
    report_reader_dir,
)
from benchmarks.ncu.source import COLUMNS, parse_cuda_sass_view
from formulas.bank_conflict import BankConflict
from formulas.memory_access import MemoryAccess
from formulas.selection import formulas_for, metrics_for
from intelliperf.contract.profile import Column
from intelliperf.errors import ProfileError
from intelliperf.gpu.nvidia.metrics import kernel_metrics
from tests.recorded import RECORDED

FIXTURES = RECORDED / "raw_page_reader"

FAKE_REPORT_MODULE = """
class IMetric:
    ValueKind_UNKNOWN, ValueKind_ANY, ValueKind_STRING, ValueKind_FLOAT = 0, 1, 2, 3
    ValueKind_DOUBLE, ValueKind_UINT32, ValueKind_UINT64 = 4, 5, 6

class IAction:
    NameBase_FUNCTION, NameBase_DEMANGLED, NameBase_MANGLED = 0, 1, 2

class Metric:
    def __init__(self, unit, kind, value):
        self._unit, self._kind, self._value = unit, kind, value
    def unit(self): return self._unit
    def kind(self): return self._kind
    def as_string(self): return self._value
    def as_double(self): return self._value
    def as_uint64(self): return self._value

class Action:
    def __init__(self, mangled, metrics):
        self._mangled, self._metrics = mangled, metrics
    def name(self, base=0):
        return self._mangled if base == IAction.NameBase_MANGLED else "demangled " + self._mangled
    def metric_names(self): return list(self._metrics)
    def metric_by_name(self, name):  # None for a metric the action lacks, as ncu_report's does
        return Metric(*self._metrics[name]) if name in self._metrics else None

class Range:
    def __init__(self, actions): self._actions = actions
    def num_actions(self): return len(self._actions)
    def action_by_idx(self, i): return self._actions[i]

class Context:
    def __init__(self, ranges): self._ranges = ranges
    def num_ranges(self): return len(self._ranges)
    def range_by_idx(self, i): return self._ranges[i]

def load_report(path):
    if "broken" in path:
        raise RuntimeError("cannot open " + path)
    first = Action("_Z1aPf", {
        "gpu__time_duration.sum": ("ns", IMetric.ValueKind_DOUBLE, 2048.5),
        "launch__registers_per_thread": ("register/thread", IMetric.ValueKind_UINT64, 40),
        "device__attribute_display_name": ("", IMetric.ValueKind_STRING, "NVIDIA H100 80GB HBM3"),
        "smsp__odd.sum": ("", IMetric.ValueKind_UNKNOWN, None),
    })
    second = Action("_ZN2ns1bILi8EEEvPf", {"gpu__time_duration.sum": ("ns", IMetric.ValueKind_UINT64, 96)})
    return Context([Range([first]), Range([second])])
"""

FAKE_NCU = """#!/bin/bash
# stands in for `ncu --import REPORT --page raw --csv ...`: prints a one-kernel raw page
echo '"ID","Kernel Name","gpu__time_duration.sum"'
echo '"","","nsecond"'
echo '"0","_Z8exportedv","1,234.50"'
"""


def fake_ncu_install(root: Path, *, with_reader: bool) -> Path:
    ncu = root / "ncu"
    ncu.parent.mkdir(parents=True, exist_ok=True)
    ncu.write_text(FAKE_NCU)
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    if with_reader:
        reader = root / "extras" / "python"
        reader.mkdir(parents=True)
        (reader / "ncu_report.py").write_text(FAKE_REPORT_MODULE)
    return ncu


def test_the_reader_writes_the_raw_page_layout_for_every_launch(tmp_path: Path) -> None:
    ncu = fake_ncu_install(tmp_path / "install", with_reader=True)
    kernels = parse_raw_csv(read_raw_page(str(ncu), tmp_path / "profile.ncu-rep"))
    assert [k.name for k in kernels] == ["_Z1aPf", "_ZN2ns1bILi8EEEvPf"]  # mangled, in report order
    first, second = kernels
    assert first.metrics["gpu__time_duration.sum"] == 2048.5  # full precision, base unit
    assert first.metrics["launch__registers_per_thread"] == 40
    assert first.text["device__attribute_display_name"] == "NVIDIA H100 80GB HBM3"
    # a value of a kind the page would not show, and a metric one launch lacks, are n/a: never 0
    assert "smsp__odd.sum" not in first.metrics and first.text["smsp__odd.sum"] == "n/a"
    assert "launch__registers_per_thread" not in second.metrics
    assert second.metrics["gpu__time_duration.sum"] == 96


def test_the_reader_writes_only_the_metrics_asked_for_in_their_order(tmp_path: Path) -> None:
    ncu = fake_ncu_install(tmp_path / "install", with_reader=True)
    wanted = ["launch__registers_per_thread", "gpu__time_duration.sum", "dram__not_in_the_report.sum"]
    page = read_raw_page(str(ncu), tmp_path / "profile.ncu-rep", metrics=wanted)
    assert page.splitlines()[0] == '"ID","Kernel Name",' + ",".join(f'"{name}"' for name in wanted)
    first, second = parse_raw_csv(page)
    assert {*first.metrics, *first.text} == {"ID", "Kernel Name", *wanted}
    assert first.metrics["launch__registers_per_thread"] == 40
    assert first.metrics["gpu__time_duration.sum"] == 2048.5
    assert first.text["dram__not_in_the_report.sum"] == "n/a"  # asked for, not measured: never 0
    assert "device__attribute_display_name" not in first.text
    assert second.metrics["gpu__time_duration.sum"] == 96
    assert "launch__registers_per_thread" not in second.metrics


def test_without_the_reader_the_page_is_exported_by_ncu(tmp_path: Path) -> None:
    ncu = fake_ncu_install(tmp_path / "install", with_reader=False)
    (kernel,) = parse_raw_csv(read_raw_page(str(ncu), tmp_path / "profile.ncu-rep"))
    assert kernel.name == "_Z8exportedv" and kernel.metrics["gpu__time_duration.sum"] == 1234.5


def test_a_reader_that_fails_names_itself_and_its_error(tmp_path: Path) -> None:
    ncu = fake_ncu_install(tmp_path / "install", with_reader=True)
    with pytest.raises(ProfileError) as error:
        read_raw_page(str(ncu), tmp_path / "broken.ncu-rep")
    assert "ncu_report.py" in str(error.value) and "broken.ncu-rep" in str(error.value)
    assert "cannot open" in error.value.log_tail


def test_the_reader_runs_in_its_own_interpreter_with_the_standard_library_only() -> None:
    source = RAW_PAGE_READER.read_text()
    imports = set(re.findall(r"^\s*(?:from|import) (\w+)", source, flags=re.MULTILINE))
    assert imports <= {"__future__", "csv", "sys", "typing", "ncu_report"} | set(sys.stdlib_module_names)


@pytest.mark.parametrize("example", ["divergent_lanes", "tile_sums"])
def test_the_reader_agrees_with_ncus_export_of_the_same_report(example: str) -> None:
    """Recorded on an H100: the same report read both ways; the export rounds to two decimals."""
    reader = parse_raw_csv((FIXTURES / example / "raw.csv").read_text())
    export = parse_raw_csv((FIXTURES / example / "raw_export.csv").read_text())
    assert [k.name for k in reader] == [k.name for k in export]
    wanted = set(kernel_metrics(metrics_for(formulas_for("auto")), "sm_90"))
    for read, exported in zip(reader, export, strict=True):
        assert wanted & set(exported.metrics) <= set(read.metrics)
        for name, value in exported.metrics.items():
            if name in read.metrics:  # the export's fixed columns (Process ID, ...) are not metrics
                assert read.metrics[name] == pytest.approx(value, rel=1e-3, abs=0.006), name
        assert (
            read.text.get("device__attribute_display_name") == exported.text["device__attribute_display_name"]
        )


def test_the_source_section_holds_exactly_the_columns_the_formulas_read() -> None:
    """Every column costs the counter pass; warp-stall sampling alone added a replay pass per kernel."""
    section = (SECTION_FOLDER / f"{SOURCE_SECTION}.section").read_text()
    labels = set(re.findall(r'Label: "([^"]+)"', section))
    assert labels == set(COLUMNS)
    assert set(COLUMNS.values()) == set(Column)  # every per-instruction column the formulas read
    assert "pcsamp" not in section
    assert re.search(rf'^Identifier: "{SOURCE_SECTION}"$', section, flags=re.MULTILINE)


@pytest.mark.parametrize(
    ("page", "columns"),
    [
        ("raw_page_reader/divergent_lanes", (Column.EXECUTED, MemoryAccess.excessive_column)),
        ("raw_page_reader/tile_sums", (Column.THREADS_EXECUTED, MemoryAccess.ideal_column)),
        ("transpose_bank/original", (BankConflict.excessive_column, BankConflict.total_column)),
    ],
)
def test_the_recorded_source_page_of_our_section_has_those_columns(
    page: str, columns: tuple[Column, ...]
) -> None:
    """Recorded with our section. ncu leaves out a column no instruction of a kernel contributes to, so the
    shared-memory columns are looked for in a kernel with shared accesses."""
    text = (FIXTURES.parent / page / "source_cuda_sass.csv").read_text()
    assert parse_cuda_sass_view(text), "no kernel on the page"
    header = next(line for line in text.splitlines() if line.startswith('"Line No"'))
    assert '"Warp Stall Sampling (Not-issued Samples)"' not in header  # SourceCounters' column, not ours
    labels = {column: label for label, column in COLUMNS.items()}
    for column in columns:
        assert f'"{labels[column]}"' in header


def test_the_profiling_run_loads_only_our_section_and_applies_no_rules(tmp_path: Path) -> None:
    command = profile_command(
        "ncu", ["./app"], kernel_names=["k"], metrics=["m"], report=tmp_path / "r", log=tmp_path / "l"
    )
    assert command[command.index("--section-folder") + 1] == str(SECTION_FOLDER)
    assert command[command.index("--section") + 1] == SOURCE_SECTION
    assert command[command.index("--apply-rules") + 1] == "no"


def test_the_reader_is_found_from_ncu_on_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ncu` as the settings name it by default: found on PATH, through a symlink as CUDA installs it."""
    ncu = fake_ncu_install(tmp_path / "nsight-compute" / "2025.3.1", with_reader=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "ncu").symlink_to(ncu)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert report_reader_dir("ncu") == ncu.parent / "extras" / "python"
    assert parse_raw_csv(read_raw_page("ncu", tmp_path / "r.ncu-rep"))[0].name == "_Z1aPf"
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert report_reader_dir("ncu") is None


def test_behind_the_cuda_toolkits_wrapper_the_newest_installation_is_read(tmp_path: Path) -> None:
    """CUDA's bin/ncu is a script that runs the newest /opt/nvidia/nsight-compute/<version>."""
    opt = tmp_path / "opt" / "nvidia" / "nsight-compute"
    fake_ncu_install(opt / "2025.3.1", with_reader=True)
    fake_ncu_install(opt / "2024.10.2", with_reader=True)
    (opt / "2025.10.0").mkdir(parents=True)  # no reader: passed over
    wrapper = fake_ncu_install(tmp_path / "cuda" / "bin", with_reader=False)
    assert report_reader_dir(str(wrapper), opt=opt) == opt / "2025.3.1" / "extras" / "python"
    assert report_reader_dir(str(wrapper), opt=tmp_path / "nowhere") is None

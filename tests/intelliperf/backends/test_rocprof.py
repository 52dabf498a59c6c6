"""The rocprofv3 side of the AMD backend: its commands, its CSV files, and runs of a stand-in rocprofv3.

The fixtures are hand-made from the documented format (tests/fixtures/amd/rocprofv3/README.md), not
recorded on AMD hardware; the expected numbers below are the README's table, written out again here.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

import pytest

from intelliperf.errors import AppError, ProfileError
from intelliperf.gpu.amd.rocprof import (
    KernelResources,
    collect_counters,
    counter_command,
    find_output,
    kernel_name_regex,
    kernel_trace_command,
    parse_counters,
    parse_kernel_resources,
    parse_kernel_trace,
    trace_kernels,
)
from tests.conftest import FIXTURES
from tests.support.fake_rocprof import install_fake_rocprofv3

ROCPROF = FIXTURES / "amd" / "rocprofv3"
TRACE = (ROCPROF / "kernel_trace.csv").read_text()
COUNTERS = (ROCPROF / "counter_collection.csv").read_text()

LDS = "lds_transpose(float*, float const*)"
SCATTER = "scatter_add(float*, int const*, float const*, int)"
SAXPY = "saxpy(int, float, float const*, float*)"
STRIDED = "strided_copy(float*, float const*, int)"
DURATIONS = {
    SCATTER: [90000, 85000, 95000],
    LDS: [52000, 48000, 50000, 61000],
    SAXPY: [8000, 7000, 9000, 8000, 7500],
    STRIDED: [45000, 47000],
}
RANKED = [SCATTER, LDS, STRIDED, SAXPY]
APP_OK = [sys.executable, "-c", "print('app ran')"]
APP_FAILS = [sys.executable, "-c", "import sys; print('bad input', file=sys.stderr); sys.exit(3)"]


@pytest.fixture
def fake_rocprofv3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A `rocprofv3` on PATH; returns the log of the option lists it was called with."""
    return install_fake_rocprofv3(tmp_path, monkeypatch)


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


# ----------------------------------------------------------------------------------------------------------
# Commands


def test_the_kernel_trace_command_asks_for_csv_in_the_given_folder(tmp_path: Path) -> None:
    command = kernel_trace_command("rocprofv3", ["./app", "-n", "3"], tmp_path / "out")
    assert command[0] == "rocprofv3" and "--kernel-trace" in command
    assert command[command.index("--output-format") + 1] == "csv"
    assert command[command.index("--output-directory") + 1] == str(tmp_path / "out")
    assert command[command.index("--") :] == ["--", "./app", "-n", "3"]
    assert "-o" not in command  # each process keeps its default <hostname>/<pid> file


def test_the_counter_command_profiles_the_first_dispatch_of_the_named_kernels(tmp_path: Path) -> None:
    regex = kernel_name_regex([LDS, SAXPY, LDS])
    command = counter_command(
        "/opt/rocm/bin/rocprofv3", ["./app"], tmp_path, ["SQ_WAVES", "SQ_INSTS_LDS"], regex
    )
    assert command[command.index("--pmc") + 1] == "SQ_WAVES,SQ_INSTS_LDS"
    assert command[command.index("--kernel-include-regex") + 1] == regex
    assert command[command.index("--kernel-iteration-range") + 1] == "[1]"
    assert command[command.index("--output-format") + 1] == "csv"
    assert command[command.index("--output-directory") + 1] == str(tmp_path)
    assert command[-2:] == ["--", "./app"]
    every = counter_command("rocprofv3", ["./app"], tmp_path, ["SQ_WAVES"], regex, first_dispatch=False)
    assert "--kernel-iteration-range" not in every


def test_the_kernel_regex_matches_exactly_the_named_kernels() -> None:
    regex = kernel_name_regex([LDS, SAXPY])
    assert regex == r"^(lds_transpose\(float\*, float const\*\)|saxpy\(int, float, float const\*, float\*\))$"
    assert re.search(regex, LDS) and re.search(regex, SAXPY)
    assert not re.search(regex, SCATTER)
    assert not re.search(regex, "void lds_transpose(float*, float const*)")
    assert re.search(kernel_name_regex(["void k<8>(a::b [2])"]), "void k<8>(a::b [2])")


@pytest.mark.parametrize("counters", [[], ["SQ_WAVES,SQ_BUSY_CYCLES"], ["SQ WAVES"], [""]])
def test_a_counter_list_that_is_not_one_name_per_item_is_refused(tmp_path: Path, counters: list[str]) -> None:
    with pytest.raises(ValueError):
        counter_command("rocprofv3", ["./app"], tmp_path, counters, "^(k)$")


# ----------------------------------------------------------------------------------------------------------
# Kernel trace


def test_the_kernel_trace_ranks_kernels_by_total_time() -> None:
    stats = parse_kernel_trace(TRACE)
    assert [s.name for s in stats] == RANKED
    for s in stats:
        durations = DURATIONS[s.name]
        assert s.demangled == s.name  # rocprofv3 prints demangled names by default
        assert s.launches == len(durations)
        assert s.total_ns == sum(durations)
        assert s.mean_ns == pytest.approx(sum(durations) / len(durations))
        assert s.median_ns == statistics.median(durations)
        assert (s.min_ns, s.max_ns) == (min(durations), max(durations))
    by_name = {s.name: s for s in stats}
    assert by_name[SCATTER].total_ns == 270_000
    assert by_name[LDS].median_ns == 51_000  # (50000 + 52000) / 2
    assert by_name[SAXPY].median_ns == 8_000


def test_the_resources_come_from_each_kernels_first_dispatch() -> None:
    resources = parse_kernel_resources(TRACE)
    assert resources[LDS] == KernelResources(
        vgpr_count=16,
        accum_vgpr_count=0,
        sgpr_count=32,
        lds_bytes=4608,
        scratch_bytes=0,
        workgroup_size=(32, 8, 1),
        grid_size=(4096, 1024, 1),
    )
    assert resources[SAXPY].workgroup_size == (256, 1, 1)
    assert resources[SCATTER].vgpr_count == 12
    assert set(resources) == set(RANKED)


# The header of rocprofiler-sdk's documentation sample of 2024 (ROCm 6.2/6.3), with two of its rows.
OLD_TRACE = (
    '"Kind","Agent_Id","Queue_Id","Thread_Id","Dispatch_Id","Kernel_Id","Kernel_Name","Correlation_Id",'
    '"Start_Timestamp","End_Timestamp","Private_Segment_Size","Group_Segment_Size","Workgroup_Size_X",'
    '"Workgroup_Size_Y","Workgroup_Size_Z","Grid_Size_X","Grid_Size_Y","Grid_Size_Z"\n'
    '"KERNEL_DISPATCH",1,1,69,1,16,"void addition_kernel<float>(float*, float const*, float const*, int, '
    'int)",1451,8819330200067564,8819330200116308,0,0,64,1,1,1024,1024,1\n'
    '"KERNEL_DISPATCH",1,2,69,5,16,"void addition_kernel<float>(float*, float const*, float const*, int, '
    'int)",1484,8819330200118678,8819330200219573,0,0,64,1,1,1024,1024,1\n'
)


def test_the_older_documented_kernel_trace_header_is_read_too() -> None:
    [stats] = parse_kernel_trace(OLD_TRACE)
    assert stats.launches == 2
    assert stats.total_ns == (8819330200116308 - 8819330200067564) + (8819330200219573 - 8819330200118678)
    [resources] = parse_kernel_resources(OLD_TRACE).values()
    assert (
        resources.vgpr_count is None and resources.lds_bytes == 0 and resources.grid_size == (1024, 1024, 1)
    )


@pytest.mark.parametrize("column", ["Kernel_Name", "Start_Timestamp", "End_Timestamp"])
def test_a_kernel_trace_without_a_required_column_is_a_profile_error(column: str) -> None:
    header, *rows = TRACE.splitlines()
    renamed = header.replace(f'"{column}"', '"Something_Else"')
    with pytest.raises(ProfileError, match=rf"run/kernel_trace\.csv has no {column} column"):
        parse_kernel_trace("\n".join([renamed, *rows]), "run/kernel_trace.csv")


def test_a_malformed_kernel_trace_row_is_a_profile_error() -> None:
    header, first, *_ = TRACE.splitlines()
    with pytest.raises(ProfileError, match=r"k\.csv:2: Start_Timestamp"):
        parse_kernel_trace("\n".join([header, first.replace(",3200098838431081,", ",soon,")]), "k.csv")
    with pytest.raises(ProfileError, match=r"k\.csv:2: .* fields"):
        parse_kernel_trace("\n".join([header, first + ",1"]), "k.csv")
    with pytest.raises(ProfileError, match="empty"):
        parse_kernel_trace("", "k.csv")


# ----------------------------------------------------------------------------------------------------------
# Counters


def test_the_counters_are_those_of_each_kernels_first_dispatch() -> None:
    counters = parse_counters(COUNTERS)
    assert set(counters) == set(RANKED)
    # Dispatch 1 (lds_transpose's first) comes after its dispatch 4 in the file; dispatch 1 is read.
    assert counters[LDS]["SQ_LDS_BANK_CONFLICT"] == 2097152.0
    assert counters[LDS]["TCC_HIT_sum"] == 131072.0 and counters[LDS]["TCC_MISS_sum"] == 262144.0
    assert counters[SCATTER]["SQ_BUSY_CYCLES"] == 368640.0
    assert counters[SCATTER]["TCC_EA0_ATOMIC"] == 16384.0
    assert counters[SCATTER]["TCP_TOTAL_ATOMIC_WITHOUT_RET"] == 64 * 16384.0  # a request per lane
    assert counters[SAXPY]["SQ_WAVE_CYCLES"] == 1048576.0 and counters[SAXPY]["TCC_HIT_sum"] == 0.0
    assert counters[LDS]["MeanOccupancyPerCU"] == 24.0  # a derived counter: one row of its own name
    assert len(counters[SAXPY]) == 25


COUNTER_HEADER = (
    '"Correlation_Id","Dispatch_Id","Agent_Id","Queue_Id","Process_Id","Thread_Id","Grid_Size",'
    '"Kernel_Id","Kernel_Name","Workgroup_Size","LDS_Block_Size","Scratch_Size","VGPR_Count",'
    '"Accum_VGPR_Count","SGPR_Count","Counter_Name","Counter_Value","Start_Timestamp","End_Timestamp"'
)


def counter_row(dispatch: int, counter: str, value: str) -> str:
    return f'{dispatch},{dispatch},"Agent 4",1,7,7,64,3,"k(int)",64,0,0,8,0,16,"{counter}",{value},10,20'


def test_a_counter_without_a_number_is_left_out_not_read_as_zero() -> None:
    text = "\n".join(
        [
            COUNTER_HEADER,
            counter_row(1, "SQ_WAVES", "4.000000"),
            counter_row(1, "SQ_INSTS_VALU", ""),
            counter_row(1, "SQ_INSTS_LDS", "n/a"),
            counter_row(1, "SQ_BUSY_CYCLES", "nan"),
        ]
    )
    assert parse_counters(text) == {"k(int)": {"SQ_WAVES": 4.0}}


def test_rows_of_one_dispatch_and_counter_are_summed() -> None:
    text = "\n".join(
        [
            COUNTER_HEADER,
            counter_row(2, "TCC_HIT", "5"),
            counter_row(2, "TCC_HIT", "7"),
            counter_row(9, "TCC_HIT", "100"),
        ]
    )
    assert parse_counters(text) == {"k(int)": {"TCC_HIT": 12.0}}


@pytest.mark.parametrize("column", ["Dispatch_Id", "Kernel_Name", "Counter_Name", "Counter_Value"])
def test_a_counter_file_without_a_required_column_is_a_profile_error(column: str) -> None:
    header, *rows = COUNTERS.splitlines()
    renamed = header.replace(f'"{column}"', '"Other"')
    with pytest.raises(ProfileError, match=rf"pmc_1/9_counter_collection\.csv has no {column} column"):
        parse_counters("\n".join([renamed, *rows]), "pmc_1/9_counter_collection.csv")


# ----------------------------------------------------------------------------------------------------------
# Output files


def test_find_output_finds_the_files_in_host_and_pass_folders(tmp_path: Path) -> None:
    for path in (
        "node1/811_kernel_trace.csv",
        "node1/812_kernel_trace.csv",
        "pmc_1/node1/9_kernel_trace.csv",
    ):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    (tmp_path / "node1" / "811_kernel_stats.csv").write_text("x")
    (tmp_path / "node1" / "811_my_kernel_trace.csv.bak").write_text("x")
    found = find_output(tmp_path, "kernel_trace.csv")
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "node1/811_kernel_trace.csv",
        "node1/812_kernel_trace.csv",
        "pmc_1/node1/9_kernel_trace.csv",
    ]


def test_find_output_names_what_it_expected_and_what_is_there(tmp_path: Path) -> None:
    (tmp_path / "node1").mkdir()
    (tmp_path / "node1" / "811_agent_info.csv").write_text("x")
    with pytest.raises(ProfileError) as error:
        find_output(tmp_path, "counter_collection.csv")
    message = str(error.value)
    assert "no counter_collection.csv" in message and "<hostname>/<pid>_counter_collection.csv" in message
    assert "node1/811_agent_info.csv" in message
    with pytest.raises(ProfileError, match=r"no kernel_trace\.csv"):
        find_output(tmp_path / "missing", "kernel_trace.csv")


# ----------------------------------------------------------------------------------------------------------
# Runs of the stand-in rocprofv3


def test_trace_kernels_runs_rocprofv3_and_ranks_its_trace(fake_rocprofv3: Path, tmp_path: Path) -> None:
    trace = trace_kernels("rocprofv3", APP_OK, cwd=tmp_path, workdir=tmp_path / "work", timeout_s=60)
    assert [s.name for s in trace.stats] == RANKED
    assert [s.total_ns for s in trace.stats] == [sum(DURATIONS[n]) for n in RANKED]
    assert trace.resources[LDS].lds_bytes == 4608
    assert trace.wall_s > 0
    [options] = calls(fake_rocprofv3)
    assert "--kernel-trace" in options


def test_collect_counters_runs_one_pass_per_group_on_the_named_kernels(
    fake_rocprofv3: Path, tmp_path: Path
) -> None:
    groups = [["SQ_WAVES", "SQ_LDS_BANK_CONFLICT"], ["TCC_HIT_sum", "TCC_MISS_sum"]]
    counters = collect_counters(
        "rocprofv3",
        APP_OK,
        cwd=tmp_path,
        workdir=tmp_path / "work",
        kernel_names=[LDS, SAXPY],
        counter_groups=groups,
        timeout_s=60,
    )
    assert counters == {
        LDS: {
            "SQ_WAVES": 65536.0,
            "SQ_LDS_BANK_CONFLICT": 2097152.0,
            "TCC_HIT_sum": 131072.0,
            "TCC_MISS_sum": 262144.0,
        },
        SAXPY: {
            "SQ_WAVES": 16384.0,
            "SQ_LDS_BANK_CONFLICT": 0.0,
            "TCC_HIT_sum": 0.0,
            "TCC_MISS_sum": 32768.0,
        },
    }
    runs = calls(fake_rocprofv3)
    assert [run[run.index("--pmc") + 1] for run in runs] == [
        "SQ_WAVES,SQ_LDS_BANK_CONFLICT",
        "TCC_HIT_sum,TCC_MISS_sum",
    ]
    assert len({run[run.index("--output-directory") + 1] for run in runs}) == 2


def test_a_counter_the_gpu_lacks_is_a_profile_error(fake_rocprofv3: Path, tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="no value of GRBM_NOT_A_COUNTER"):
        collect_counters(
            "rocprofv3",
            APP_OK,
            cwd=tmp_path,
            workdir=tmp_path / "work",
            kernel_names=[LDS],
            counter_groups=[["SQ_WAVES", "GRBM_NOT_A_COUNTER"]],
            timeout_s=60,
        )


def test_a_kernel_filter_that_matches_nothing_is_a_profile_error(
    fake_rocprofv3: Path, tmp_path: Path
) -> None:
    with pytest.raises(ProfileError, match="matched no dispatch"):
        collect_counters(
            "rocprofv3",
            APP_OK,
            cwd=tmp_path,
            workdir=tmp_path / "work",
            kernel_names=["gone(int)"],
            counter_groups=[["SQ_WAVES"]],
            timeout_s=60,
        )


def test_the_application_failing_is_an_app_error(fake_rocprofv3: Path, tmp_path: Path) -> None:
    with pytest.raises(AppError) as error:
        trace_kernels("rocprofv3", APP_FAILS, cwd=tmp_path, workdir=tmp_path / "work", timeout_s=60)
    assert "exited with code 3" in str(error.value) and "bad input" in str(error.value)


def test_rocprofv3_failing_is_a_profile_error(
    fake_rocprofv3: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ROCPROF_FAIL", "Cannot specify both --pmc and (input file) pmc_groups")
    with pytest.raises(ProfileError) as error:
        trace_kernels("rocprofv3", APP_OK, cwd=tmp_path, workdir=tmp_path / "work", timeout_s=60)
    assert "rocprofv3 exited with code 1" in str(error.value) and "pmc_groups" in str(error.value)


def test_a_stale_output_folder_is_not_read_again(fake_rocprofv3: Path, tmp_path: Path) -> None:
    stale = tmp_path / "work" / "rocprof-trace" / "old-host"
    stale.mkdir(parents=True)
    (stale / "1_kernel_trace.csv").write_text(TRACE)
    trace = trace_kernels("rocprofv3", APP_OK, cwd=tmp_path, workdir=tmp_path / "work", timeout_s=60)
    assert trace.stats[0].launches == 3  # one file's dispatches, not two
    assert not stale.exists()


def test_a_rocprofiler_fatal_log_line_is_a_profile_error(
    fake_rocprofv3: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = "F20250809 01:02:03.456789 834304 tool.cpp:1192] Could not construct profile cfg failed"
    monkeypatch.setenv("FAKE_ROCPROF_GLOG", line)
    with pytest.raises(ProfileError) as error:
        trace_kernels("rocprofv3", APP_OK, cwd=tmp_path, workdir=tmp_path / "work", timeout_s=60)
    assert "killed by signal SIGABRT" in str(error.value) and "Could not construct" in str(error.value)

"""The `intelliperf` command as a user runs it: real subprocesses, recorded profiles instead of a GPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from intelliperf.contract import Report
from intelliperf.errors import (
    BuildError,
    KernelNotFoundError,
    LlmError,
    NoGpuError,
    NoLineInfoError,
    SpecError,
)
from tests.conftest import gpu_available
from tests.recorded import EXAMPLES, RECORDED, ROOT


def intelliperf(
    *args: str, cwd: Path = ROOT, env_extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTELLIPERF_")} | (env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "intelliperf", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def replay(name: str, *args: str, variant: str = "original") -> subprocess.CompletedProcess[str]:
    return intelliperf(
        "run", "--replay", str(RECORDED / name / variant), "-p", str(EXAMPLES / name), *args, "--", "./app"
    )


def test_schema_prints_valid_json_schemas() -> None:
    for which, title in (("job", "JobSpec"), ("report", "Report")):
        result = intelliperf("schema", which)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["title"] == title
    bad = intelliperf("schema", "nope")
    assert bad.returncode == SpecError.exit_code and "choose 'job' or 'report'" in bad.stderr


def test_run_prints_the_table_and_writes_the_report(tmp_path: Path) -> None:
    output = tmp_path / "report.json"
    result = replay("transpose_bank", "-f", "auto", "-o", str(output))
    assert result.returncode == 0, result.stderr
    assert "Top kernels" in result.stdout and "bankConflict" in result.stdout
    assert "transpose.cu:59" in result.stdout
    # the diagnosis names the kernel as the table does, not by its mangled name
    assert "bankConflict in transpose_tiled(float const*, float*, int, int):" in result.stdout
    assert "_Z15transpose_tiled" not in result.stdout
    for stage in ("timing", "counters", "diagnose"):
        assert f"✓ {stage}" in result.stderr
    report = Report.model_validate_json(output.read_text())
    assert report.selected is not None and report.selected.formula == "bankConflict"
    assert any("a replayed profile is diagnosed only" in w for w in report.warnings)
    assert report.optimization is None


def test_summary_file_is_the_markdown_of_the_report(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    result = replay("transpose_bank", "-f", "diagnoseOnly", "--summary_file", str(summary))
    assert result.returncode == 0, result.stderr
    text = summary.read_text()
    assert text.startswith("## IntelliPerf diagnosis") and "transpose.cu:59" in text
    assert "```cuda" in text and f"summary written to {summary}" in result.stderr


def test_named_formula_runs_only_that_formula(tmp_path: Path) -> None:
    output = tmp_path / "r.json"
    result = replay("strided_copy", "-f", "memoryAccess", "-o", str(output))
    assert result.returncode == 0, result.stderr
    report = Report.model_validate_json(output.read_text())
    assert {d.formula for d in report.diagnoses} == {"memoryAccess"}


def test_clean_application_says_so() -> None:
    result = replay("clean_saxpy", "-f", "diagnoseOnly")
    assert result.returncode == 0, result.stderr
    assert "No bottleneck found" in result.stdout


def test_kernel_filter(tmp_path: Path) -> None:
    output = tmp_path / "r.json"
    assert replay("transpose_bank", "-k", "transpose_", "-o", str(output)).returncode == 0
    assert [k.demangled.split("(")[0] for k in Report.model_validate_json(output.read_text()).kernels] == [
        "transpose_tiled"
    ]
    result = replay("transpose_bank", "-k", "nothing_like_this")
    assert result.returncode == KernelNotFoundError.exit_code
    assert "matched none of the 2 kernels" in result.stderr and "transpose_tiled" in result.stderr


def test_failing_build_names_the_command_and_shows_its_output() -> None:
    result = replay("transpose_bank", "-b", "echo compiling; echo 'error: boom' >&2; exit 2")
    assert result.returncode == BuildError.exit_code
    assert "exited with code 2" in result.stderr and "error: boom" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-f", "bankConflicts"], "unknown formula 'bankConflicts'"),
        (["--top_n", "0"], "top_n"),
        (["-k", "(unclosed"], "kernel"),
    ],
)
def test_bad_options_are_exit_2_with_the_field(args: list[str], message: str) -> None:
    result = replay("transpose_bank", *args)
    assert result.returncode == SpecError.exit_code, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert "Value error" not in result.stderr  # the rule, not the exception's class


def test_missing_application_command_and_project() -> None:
    result = intelliperf("run", "--replay", str(RECORDED / "transpose_bank" / "original"))
    assert result.returncode == SpecError.exit_code and "no application given" in result.stderr
    result = intelliperf(
        "run", "--replay", str(RECORDED / "transpose_bank" / "original"), "-p", "/no/such/dir", "--", "./a"
    )
    assert result.returncode == SpecError.exit_code and "/no/such/dir" in result.stderr


def test_replay_of_a_folder_that_does_not_exist_says_so(tmp_path: Path) -> None:
    result = intelliperf("run", "--replay", str(tmp_path / "nowhere"), "-p", str(EXAMPLES / "transpose_bank"),
                         "--", "./app")  # fmt: skip
    assert result.returncode == SpecError.exit_code
    assert f"--replay {tmp_path / 'nowhere'}: no such folder" in result.stderr


def test_replay_of_a_folder_that_is_not_a_recording_is_bad_input(tmp_path: Path) -> None:
    result = intelliperf("run", "--replay", str(tmp_path), "--", "./a")
    assert result.returncode == SpecError.exit_code, result.stderr
    assert "replay: " in result.stderr and "is not a recorded profile: it has no trace.jsonl" in result.stderr
    assert "--replay tests/fixtures/gpu/transpose_bank/original" in result.stderr  # a recording that ships


def test_validate_refuses_an_output_file_it_could_not_write(tmp_path: Path) -> None:
    result = intelliperf("validate", "-k", "k", "--reference", "./r", "--candidate", "./c",
                         "-o", str(tmp_path / "missing" / "v.json"))  # fmt: skip
    assert result.returncode == SpecError.exit_code and "does not exist" in result.stderr


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU message")
def test_validate_without_a_gpu_says_so_before_building_anything() -> None:
    result = intelliperf("validate", "-k", "block_sum", "--reference", "bin/ref", "--candidate", "bin/fixed")
    assert result.returncode == NoGpuError.exit_code and "no NVIDIA GPU" in result.stderr
    assert "building Accordo" not in result.stderr and "capturing" not in result.stderr


@pytest.mark.skipif(gpu_available(), reason="checks the no-GPU message")
def test_no_gpu_is_exit_3() -> None:
    result = intelliperf(
        "run", "-f", "diagnoseOnly", "-p", str(EXAMPLES / "transpose_bank"), "--", "./bin/transpose"
    )
    assert result.returncode == NoGpuError.exit_code and "no NVIDIA GPU" in result.stderr


def test_the_loop_checks_its_needs_before_profiling(monkeypatch: pytest.MonkeyPatch) -> None:
    """No build command, then no LLM key: each is refused at once, before the GPU is even looked for."""
    project = ["-p", str(EXAMPLES / "transpose_bank")]
    result = intelliperf("run", "-f", "bankConflict", *project, "--", "./bin/transpose")
    assert result.returncode == SpecError.exit_code and "-b/--build_command" in result.stderr
    monkeypatch.delenv("LLM_GATEWAY_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = intelliperf("run", "-b", "make", *project, "--", "./bin/transpose")
    assert result.returncode == LlmError.exit_code, result.stderr
    assert "$LLM_GATEWAY_KEY" in result.stderr and "GPU" not in result.stderr


def test_user_tree_is_untouched_without_in_place(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "kernel.cu").write_text("// source\n")
    result = intelliperf(
        "run",
        "--replay",
        str(RECORDED / "clean_saxpy" / "original"),
        "-p",
        str(project),
        "-b",
        "touch built.txt && echo changed > kernel.cu",
        "--",
        "./app",
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in project.iterdir()) == ["kernel.cu"]
    assert (project / "kernel.cu").read_text() == "// source\n"


def test_no_line_info_is_exit_8_when_no_kernel_has_lines(tmp_path: Path) -> None:
    """A recording whose listings lack nvdisasm's line comments, as a cubin built without -lineinfo gives
    them."""
    recording = tmp_path / "noline"
    shutil.copytree(RECORDED / "transpose_bank" / "original", recording)
    for listing in recording.glob("sass-*.txt"):
        listing.write_text(
            "\n".join(line for line in listing.read_text().splitlines() if "//## File" not in line)
        )
    result = intelliperf(
        "run", "--replay", str(recording), "-p", str(EXAMPLES / "transpose_bank"), "--", "./a"
    )
    assert result.returncode == NoLineInfoError.exit_code and "-lineinfo" in result.stderr


def test_an_output_path_that_cannot_be_written_is_refused_before_any_work(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_folder" / "report.json"
    result = replay("transpose_bank", "-o", str(missing))
    assert result.returncode == SpecError.exit_code, result.stderr
    assert f"the folder {missing.parent} does not exist" in result.stderr
    assert "timing" not in result.stderr  # refused before the first pass
    result = replay("transpose_bank", "--summary_file", str(tmp_path))
    assert result.returncode == SpecError.exit_code and "is a directory; name a file" in result.stderr


def test_a_replay_says_it_reads_a_recording() -> None:
    result = replay("transpose_bank", "-f", "diagnoseOnly")
    assert result.returncode == 0, result.stderr
    assert "as recorded" in result.stderr and "reading the recorded trace" in result.stderr
    assert "the recorded CUPTI counters of 1 kernel(s)" in result.stderr
    assert "tracing every kernel launch" not in result.stderr and "looking for the GPU" not in result.stderr


def test_run_help_shows_where_the_command_goes() -> None:
    result = intelliperf("run", "--help", env_extra={"COLUMNS": "80"})
    assert result.returncode == 0
    assert "[OPTIONS] -- COMMAND [ARGS]..." in result.stdout
    # every option whole, with its default, on an 80-column terminal
    assert "-t, --accordo_absolute_tolerance <float>" in result.stdout and "1e-06" in result.stdout
    assert "intelliperf formulas" in result.stdout


def test_replay_names_a_missing_folder_and_needs_a_gpu(tmp_path: Path) -> None:
    missing = intelliperf("replay", str(tmp_path / "nowhere"))
    assert missing.returncode == SpecError.exit_code and "is not a folder" in missing.stderr
    if not gpu_available():
        no_gpu = intelliperf("replay", str(tmp_path))
        assert no_gpu.returncode == NoGpuError.exit_code, no_gpu.stderr


def test_a_counter_store_that_is_a_file_is_refused_and_a_run_without_code_hashes_keeps_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "file").write_text("x")
    refused = replay("transpose_bank", "--counter_store", str(tmp_path / "file"))
    assert refused.returncode == SpecError.exit_code and "--counter_store" in refused.stderr
    assert "not a folder" in refused.stderr
    output = tmp_path / "report.json"
    kept = replay("transpose_bank", "--counter_store", str(tmp_path / "store"), "-o", str(output))
    assert kept.returncode == 0, kept.stderr
    report = Report.model_validate_json(output.read_text())
    # recorded before the tracer hashed code: the shape is known, the code is not, so nothing is keyed
    assert report.kernels[0].shape_hash is not None and report.kernels[0].code_hash is None
    assert report.reused_counters == [] and not list((tmp_path / "store").glob("*.json"))

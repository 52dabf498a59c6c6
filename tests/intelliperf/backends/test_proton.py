"""Proton's intra-kernel profiles without a GPU: the scopes the runner puts into a kernel's source, the
commands it builds, and the profiles recorded on the GPU machine read back, rendered and given to the
model (tests/fixtures/gpu/<example>/<variant>/proton.*)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from intelliperf.console import render_report
from intelliperf.contract import Application, JobSpec
from intelliperf.engine.diagnose import run_diagnosis
from intelliperf.errors import ProfileError
from intelliperf.gpu.proton import RUNNER, python_program, read_profile, run_regions
from intelliperf.gpu.proton_runner import instrument
from intelliperf.gpu.replay import ReplayBackend
from intelliperf.llm.prompts import render_regions
from intelliperf.summary import render_summary
from tests.recorded import BY_NAME, EXAMPLES, RECORDED, RECORDED_EXAMPLES, marker_line

TRITON = [e["name"] for e in RECORDED_EXAMPLES if e.get("language") == "triton"]

LOOP_KERNEL = """def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(n):
        acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
    if n > 0:
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)
    tl.atomic_add(out_ptr, 1.0)
"""


def test_scopes_cover_the_body_each_loop_and_each_memory_statement() -> None:
    source, regions = instrument(LOOP_KERNEL, def_line=40)
    assert [(r["name"], r["kind"], r["line"]) for r in regions] == [
        ("kernel", "kernel", 40),
        ("load@L43", "load", 43),
        ("loop@L42", "loop", 42),
        ("store@L45", "store", 45),
        ("atomic@L46", "atomic", 46),
    ]
    lines = [line.strip() for line in source.splitlines()]
    assert lines[1] == "_intelliperf_proton.enter_scope('kernel')" and lines[-1].endswith(
        "exit_scope('kernel')"
    )
    loop = lines.index("for i in range(n):")
    assert lines[loop - 1] == "_intelliperf_proton.enter_scope('loop@L42')"
    assert lines[loop + 1] == "_intelliperf_proton.enter_scope('load@L43')"
    compile(source, "k", "exec")


def test_a_kernel_that_returns_early_gets_no_whole_body_scope() -> None:
    source, regions = instrument(
        "def k(x_ptr, n):\n    if n == 0:\n        return\n    tl.store(x_ptr, 1.0)\n", def_line=1
    )
    assert [r["name"] for r in regions] == ["store@L4"]
    assert "'kernel'" not in source


@pytest.mark.parametrize(
    ("argv", "interpreter", "program"),
    [
        (["python3", "-u", "app.py", "3"], ["python3", "-u"], ["app.py", "3"]),
        (
            ["/opt/py/bin/python3.12", "-m", "pkg.model", "x"],
            ["/opt/py/bin/python3.12"],
            ["-m", "pkg.model", "x"],
        ),
        (["./triton_bins.py", "3"], ["/usr/bin/env", "python3"], ["./triton_bins.py", "3"]),
    ],
)
def test_the_program_proton_runs(argv: list[str], interpreter: list[str], program: list[str]) -> None:
    assert python_program(argv, EXAMPLES / "triton_atomic") == (interpreter, program)


def test_a_compiled_program_is_refused_with_the_reason() -> None:
    with pytest.raises(ProfileError, match="is not a Python program"):
        python_program(["./bin/transpose"], EXAMPLES / "transpose_bank")


def test_a_python_without_triton_is_named_as_the_reason(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print('hello')\n")
    with pytest.raises(ProfileError, match=r"Proton \(triton.profiler\) is not installed"):
        run_regions([sys.executable, "app.py"], cwd=tmp_path, kernel="k", timeout_s=60)


def test_the_runner_explains_its_usage() -> None:
    done = subprocess.run([sys.executable, str(RUNNER), "out"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "proton_runner.py OUT KERNEL -- SCRIPT.py" in done.stderr


@pytest.mark.parametrize("name", TRITON)
def test_the_recorded_profile_puts_the_most_cycles_on_the_marked_line(name: str) -> None:
    folder = RECORDED / name / "original"
    profile = read_profile(folder / "proton.hatchet", folder / "proton.json", EXAMPLES / name)
    assert profile.file == BY_NAME[name]["source"] and profile.launches >= 3
    whole, *inner = profile.regions
    assert whole.kind == "kernel" and whole.share == 1.0 and whole.cycles_per_warp > 0
    hottest = max(inner, key=lambda r: r.share)
    if BY_NAME[name]["formula"] == "occupancy":
        # the launch shape is the bottleneck: the marker is on the kernel's declaration, the whole region
        assert whole.line == marker_line(name) and hottest.line > whole.line
    else:
        assert hottest.line == marker_line(name) and "intelliperf:" in hottest.text
    assert all(0 < r.share <= 1.0 for r in inner)


def test_a_region_without_records_is_left_out_not_read_as_zero(tmp_path: Path) -> None:
    folder = RECORDED / "triton_spill" / "original"
    tree, device = json.loads((folder / "proton.hatchet").read_text())
    kernel_node = tree["children"][0]["children"][0]
    kernel_node["children"] = [
        c for c in kernel_node["children"] if not c["frame"]["name"].startswith("load")
    ]
    (tmp_path / "proton.hatchet").write_text(json.dumps([tree, device]))
    profile = read_profile(tmp_path / "proton.hatchet", folder / "proton.json", EXAMPLES / "triton_spill")
    assert [r.kind for r in profile.regions] == ["kernel", "store"]
    kernel_node["metrics"] = {}
    (tmp_path / "proton.hatchet").write_text(json.dumps([tree, device]))
    with pytest.raises(ProfileError, match="no cycles for the whole of softmax_rows"):
        read_profile(tmp_path / "proton.hatchet", folder / "proton.json", EXAMPLES / "triton_spill")


def test_a_python_application_is_diagnosed_with_its_regions_and_they_reach_the_reader() -> None:
    name = "triton_strided"
    spec = JobSpec(applications=[Application(command=["./scale_strided.py"])], formula="auto")
    report = run_diagnosis(spec, backend=ReplayBackend(RECORDED / name / "original"), project=EXAMPLES / name)
    profile = report.intra_kernel
    assert profile is not None and profile.kernel == "scale_elements" and report.passes.regions_s is not None
    summary = render_summary(report)
    assert "### Where `scale_elements`'s cycles go" in summary
    assert f"| store | scale_strided.py:{marker_line(name)} |" in summary
    console = Console(record=True, width=160)
    render_report(report, console)
    assert "Where scale_elements's cycles go (Proton" in console.export_text()
    evidence = render_regions(profile)
    assert f"store at line {marker_line(name)}" in evidence and "of the kernel's cycles" in evidence


def test_a_compiled_application_gets_no_intra_kernel_profile() -> None:
    report = run_diagnosis(
        JobSpec(applications=[Application(command=["./bin/transpose"])]),
        backend=ReplayBackend(RECORDED / "transpose_bank" / "original"),
        project=EXAMPLES / "transpose_bank",
    )
    assert report.intra_kernel is None and report.passes.regions_s is None

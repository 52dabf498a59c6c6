"""End to end on the GPU: `intelliperf run` on every bundled example, and its error exits."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.diagnose import is_kernel
from formulas.selection import select
from intelliperf.contract import Report
from intelliperf.errors import AppError, KernelNotFoundError, NoLineInfoError
from tests.support.diagnose_run import EXAMPLES, MANIFEST, intelliperf, marker_line, run_example

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("example", [e for e in MANIFEST if e["formula"]], ids=lambda e: e["name"])
def test_finds_kernel_formula_and_line(example: dict, tmp_path: Path) -> None:
    report = run_example(example, "./" + example["app"], "diagnoseOnly", tmp_path)
    parsed = Report.model_validate(report)
    selection = select("auto", parsed.kernels, parsed.diagnoses)  # what `-f auto` optimizes
    assert selection is not None, report["diagnoses"]
    selected = selection.model_dump()
    assert selected["formula"] == example["formula"]
    kernel = next(k for k in report["kernels"] if k["name"] == selected["kernel"])
    assert is_kernel(kernel["demangled"], example["kernel"]), kernel["demangled"]
    diagnosis = next(
        d
        for d in report["diagnoses"]
        if d["kernel"] == selected["kernel"] and d["formula"] == example["formula"]
    )
    hot = diagnosis["locations"][0]
    assert hot["file"] == example["source"]  # relative to the project, not the scratch copy
    assert hot["line"] == marker_line(example)
    assert any(line["hot"] and "intelliperf:" in line["text"] for line in hot["code"])


def test_templated_namespaced_and_lambda_kernels_keep_their_lines(tmp_path: Path) -> None:
    """tile_sums: six instantiations of geom::tile_sums<TILE>, geom::detail::normalize and a kernel running a
    __device__ lambda, all profiled (-k .): each is counted by its mangled name, has source lines and
    per-instruction counters, and every formula decides on it."""
    report = tmp_path / "report.json"
    result = intelliperf(
        "run", "-f", "diagnoseOnly", "-b", "make", "-k", ".", "--top_n", "10",
        "-p", str(EXAMPLES / "tile_sums"), "-o", str(report), "--", "./bin/tile_sums",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    parsed = Report.model_validate_json(report.read_text())
    assert len(parsed.kernels) == 9 and parsed.warnings == [], parsed.warnings
    names = {k.demangled for k in parsed.kernels}
    assert {f"void geom::tile_sums<{t}>(float2 const*, float*, int)" for t in (1, 2, 4, 8, 16, 32)} <= names
    assert "geom::detail::normalize(float const*, float*, int, float)" in names
    assert any("lambda" in name for name in names)
    assert {d.kernel for d in parsed.diagnoses} == {k.name for k in parsed.kernels}
    assert all(d.decided for d in parsed.diagnoses), [d.summary for d in parsed.diagnoses if not d.decided]
    flagged = {
        k.demangled.split("(")[0]
        for k in parsed.kernels
        for d in parsed.diagnoses
        if d.kernel == k.name and d.present
    }
    assert {"void geom::tile_sums<32>", "void geom::tile_sums<16>", "void geom::tile_sums<8>"} <= flagged
    assert not any("normalize" in name or "lambda" in name or "init_points" in name for name in flagged)


def transpose(*extra: str, app: str = "./bin/transpose", env: dict[str, str] | None = None):
    return intelliperf(
        "run",
        "-f",
        "diagnoseOnly",
        "-b",
        "make all nolineinfo",
        "-p",
        str(EXAMPLES / "transpose_bank"),
        *extra,
        "--",
        app,
        env=env,
    )


def test_kernel_filter_matching_nothing() -> None:
    result = transpose("-k", "no_such_kernel")
    assert result.returncode == KernelNotFoundError.exit_code, result.stderr
    assert "matched none" in result.stderr and "transpose_tiled" in result.stderr
    assert "Traceback" not in result.stderr


def test_kernel_without_line_info() -> None:
    result = transpose(app="./bin/transpose_nolineinfo")
    assert result.returncode == NoLineInfoError.exit_code, result.stderr
    assert "-lineinfo" in result.stderr


def test_missing_application() -> None:
    result = transpose(app="./bin/not_built")
    assert result.returncode == AppError.exit_code, result.stderr
    assert "not_built" in result.stderr and "does not exist" in result.stderr


def test_a_second_run_reuses_the_reference_copys_triton_kernels_and_keeps_their_lines(tmp_path: Path) -> None:
    """Issue 41: the reference copy's Triton cache is kept from one `intelliperf run` to the next at the same
    path (engine/workspace.py), so the second run compiles nothing, and the kernels it loads from the cache
    still name the copy's files: the hot line maps to the project's source as on the first run."""
    pytest.importorskip("triton")
    example = next(e for e in MANIFEST if e["name"] == "triton_strided")
    work = tmp_path / "work"
    work.mkdir()
    cubins = []
    for n in range(2):
        out = tmp_path / f"report-{n}.json"
        result = intelliperf(
            "run", "-f", "diagnoseOnly", "-p", str(EXAMPLES / example["name"]), "-o", str(out),
            "--", "./" + example["app"], env={"INTELLIPERF_WORK_DIR": str(work)},
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        [folder] = work.iterdir()
        assert sorted(p.name for p in folder.iterdir()) == [".lock", "jit"]
        cubins.append(
            {p.relative_to(folder): p.stat().st_mtime_ns for p in (folder / "jit").rglob("*.cubin")}
        )
        report = Report.model_validate_json(out.read_text())
        diagnosis = next(d for d in report.diagnoses if d.formula == example["formula"] and d.present)
        assert (diagnosis.locations[0].file, diagnosis.locations[0].line) == (
            example["source"],
            marker_line(example),
        )
    assert cubins[0] and cubins[1] == cubins[0]

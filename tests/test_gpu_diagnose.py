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

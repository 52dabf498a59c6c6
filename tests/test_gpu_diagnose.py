"""End to end on the GPU: `intelliperf run` on every bundled example, and its error exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.diagnose import is_kernel
from formulas.selection import select
from intelliperf.contract import Report
from intelliperf.errors import AppError, KernelNotFoundError, NoLineInfoError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MANIFEST = json.loads((EXAMPLES / "examples.json").read_text())

pytestmark = pytest.mark.gpu


def intelliperf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "intelliperf", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )


def marker_line(example: dict) -> int:
    lines = (EXAMPLES / example["name"] / example["source"]).read_text().splitlines()
    return next(n for n, text in enumerate(lines, 1) if f"intelliperf: {example['formula']}" in text)


def run_example(example: dict, app: str, formula: str, tmp_path: Path) -> dict:
    report = tmp_path / "report.json"
    build = ["-b", example["build"]] if example["build"] else []
    result = intelliperf(
        "run",
        "-f",
        formula,
        *build,
        "-p",
        str(EXAMPLES / example["name"]),
        "-o",
        str(report),
        "--",
        app,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(report.read_text())


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


@pytest.mark.parametrize("example", MANIFEST, ids=lambda e: e["name"])
def test_fixed_versions_and_controls_are_clean(example: dict, tmp_path: Path) -> None:
    apps = [example["fixed_app"]] + ([] if example["formula"] else [example["app"]])
    for app in apps:
        report = run_example(example, "./" + app, "diagnoseOnly", tmp_path)
        assert report["diagnoses"], "nothing was diagnosed"
        flagged = [(d["formula"], d["kernel"], d["reasoning"]) for d in report["diagnoses"] if d["present"]]
        assert flagged == [], f"{app}: {flagged}"
        assert report["selected"] is None


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

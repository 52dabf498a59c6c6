"""Proton's intra-kernel profile of Triton kernels on the GPU: the runner instruments an unmodified
example from outside, the regions land on the example's lines, and the diagnosis reports them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from intelliperf.errors import ProfileError
from intelliperf.gpu.proton import run_regions

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def triton() -> None:
    pytest.importorskip("triton")


def copy_of(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLES / name, tmp_path / name))


def marker(path: Path) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "intelliperf:" in text)


def test_the_strided_kernel_spends_its_cycles_on_its_marked_line(tmp_path: Path) -> None:
    project = copy_of("triton_strided", tmp_path)
    before = (project / "scale_strided.py").read_text()
    profile = run_regions(["./scale_strided.py", "2"], cwd=project, kernel="scale_elements", timeout_s=300)
    assert (project / "scale_strided.py").read_text() == before, "the user's file is not edited"
    assert profile.launches == 2 and profile.warps_per_program == 4 and profile.file == "scale_strided.py"
    assert [r.kind for r in profile.regions] == ["kernel", "store"]
    whole, store = profile.regions
    assert whole.share == 1.0 and whole.cycles_per_warp > 1000
    assert store.line == marker(project / "scale_strided.py") and 0.4 < store.share < 1.0
    assert "tl.store" in store.text


def test_a_kernel_with_a_loop_records_every_iteration(tmp_path: Path) -> None:
    project = copy_of("triton_atomic", tmp_path)
    profile = run_regions(["./triton_bins_fixed.py", "8"], cwd=project, kernel="bin_sums", timeout_s=300)
    assert profile.launches == 5  # the first five; the other three run the kernel's own source
    kinds = {r.kind: r for r in profile.regions}
    assert set(kinds) == {"kernel", "loop", "load", "atomic"}
    assert kinds["loop"].share > 0.8  # 128 tiles per program: the loop is the kernel
    assert "dropped" not in profile.note


def test_a_kernel_triton_never_launches_is_said_so(tmp_path: Path) -> None:
    project = copy_of("triton_strided", tmp_path)
    with pytest.raises(ProfileError, match="never launched a kernel named no_such_kernel"):
        run_regions(["./scale_strided.py", "1"], cwd=project, kernel="no_such_kernel", timeout_s=300)


def test_the_diagnosis_reports_where_the_cycles_go(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "intelliperf", "run", "-f", "diagnoseOnly",
         "-p", str(EXAMPLES / "triton_spill"), "-o", str(out),
         "--summary_file", str(tmp_path / "summary.md"), "--", "./softmax_rows.py", "5"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    regions = report["intra_kernel"]["regions"]
    hottest = max((r for r in regions if r["kind"] != "kernel"), key=lambda r: r["share"])
    assert hottest["line"] == marker(EXAMPLES / "triton_spill" / "softmax_rows.py")
    assert report["passes"]["regions_s"] > 0
    assert "Where `softmax_rows`'s cycles go" in (tmp_path / "summary.md").read_text()
    assert "cycles go (Proton" in done.stdout + done.stderr

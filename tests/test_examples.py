"""The bundled examples build with nvcc (present on the CPU machines) and match their manifest."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MANIFEST = json.loads((EXAMPLES / "examples.json").read_text())


def fixed_source(example: dict) -> Path:
    source = EXAMPLES / example["name"] / example["source"]
    return source.with_name(source.stem + "_fixed" + source.suffix)


def kernel_definition(example: dict) -> re.Pattern[str]:
    if example.get("language") == "triton":
        return re.compile(rf"@triton\.jit\s*\ndef\s+{example['kernel']}\s*\(")
    return re.compile(rf"__global__\s+void\s+(__launch_bounds__\([^)]*\)\s+)?{example['kernel']}\s*\(")


@pytest.mark.parametrize("example", MANIFEST, ids=lambda e: e["name"])
def test_manifest_matches_the_sources(example: dict) -> None:
    original = (EXAMPLES / example["name"] / example["source"]).read_text()
    fixed = fixed_source(example).read_text()
    pattern = kernel_definition(example)
    assert pattern.search(original) and pattern.search(fixed), "same kernel name in both versions"
    markers = re.findall(r"(?://|#) intelliperf: (\w+)", original)
    assert markers == ([example["formula"]] if example["formula"] else [])
    assert "intelliperf:" not in fixed
    assert "checksum" in original and "checksum" in fixed


def test_every_example_compiles(tmp_path: Path) -> None:
    if shutil.which("nvcc") is None:
        if os.environ.get("CI"):
            pytest.fail("nvcc is not on PATH: CI must compile the examples")
        pytest.skip("nvcc is not installed")
    work = tmp_path / "examples"
    shutil.copytree(EXAMPLES, work, ignore=shutil.ignore_patterns("bin"))
    result = subprocess.run(["make", "-j2", "-s"], cwd=work, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for example in MANIFEST:
        for app in (example["app"], example["fixed_app"]):
            assert (work / example["name"] / app).is_file(), app

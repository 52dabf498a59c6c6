"""Fixtures for the Accordo tests: GPU detection and the examples built (the native library is built by
tests/conftest.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _gpu_available() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        proc = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and "GPU" in proc.stdout


def build_example(folder: Path, copy_to: Path) -> Path:
    """A copy of an example folder in ``copy_to``, built with its Makefile (Triton and PyTorch examples,
    which have none, compile as they run)."""
    if shutil.which("nvcc") is None and not Path("/usr/local/cuda/bin/nvcc").exists():
        pytest.skip("nvcc is not installed")
    target = copy_to / folder.name
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("bin"))
    if not (target / "Makefile").is_file():
        return target
    proc = subprocess.run(
        ["make", "-j8"], cwd=target, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return target


@pytest.fixture(scope="session")
def gpu() -> None:
    """Skips the test unless nvidia-smi works and lists a GPU."""
    if not _gpu_available():
        pytest.skip("no NVIDIA GPU: nvidia-smi is missing or failed")

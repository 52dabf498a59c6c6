"""Shared test set-up: a clean environment, the `gpu` marker skipping where no GPU is visible, and one build
of the native profiler's library (libintelliperf_profiler.so) per session."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def gpu_available() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        return subprocess.run([smi, "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi -L failed or is missing)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's INTELLIPERF_* settings or a stray CUDA injection."""
    for key in list(os.environ):
        if key.startswith("INTELLIPERF_") or key == "CUDA_INJECTION64_PATH":
            monkeypatch.delenv(key, raising=False)
    from intelliperf.settings import get_settings

    get_settings.cache_clear()


@pytest.fixture(scope="session")
def native_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("profiler-cache")


@pytest.fixture(scope="session")
def native_lib(native_cache: Path) -> Path:
    """libintelliperf_profiler.so, force-built into a temporary cache directory."""
    from profiler.build import CACHE_VARIABLE, native_library

    old = os.environ.get(CACHE_VARIABLE)
    os.environ[CACHE_VARIABLE] = str(native_cache)
    try:
        return native_library(force=True)
    finally:
        if old is None:
            del os.environ[CACHE_VARIABLE]
        else:
            os.environ[CACHE_VARIABLE] = old

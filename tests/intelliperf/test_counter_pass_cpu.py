"""What the NVIDIA counter pass needs before the GPU is involved: the CUDA toolkit's disassembler, and a
turn at the GPU's counters."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from intelliperf.errors import ToolMissingError
from intelliperf.gpu.cupti_counters import counter_pass_lock
from intelliperf.gpu.nvidia import NvidiaBackend
from intelliperf.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_nvdisasm_comes_from_the_configured_toolkit_then_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    backend = NvidiaBackend(Settings(cuda_home=tmp_path / "cuda"))
    with pytest.raises(ToolMissingError, match="nvdisasm was found neither") as caught:
        backend.nvdisasm()
    assert caught.value.exit_code == 4 and "INTELLIPERF_CUDA_HOME" in (caught.value.hint or "")
    on_path = tmp_path / "bin" / "nvdisasm"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(on_path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert backend.nvdisasm() == str(on_path)
    bundled = tmp_path / "cuda" / "bin" / "nvdisasm"
    bundled.parent.mkdir(parents=True)
    bundled.write_text("#!/bin/sh\n")
    assert backend.nvdisasm() == str(bundled)


def test_counter_passes_that_see_the_same_gpus_take_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second pass waits until the first has released the GPU's counters; one seeing other GPUs does not."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"test-{tmp_path.name}")
    released = tmp_path / "released"
    holder = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from intelliperf.gpu.cupti_counters import counter_pass_lock\n"
        "with counter_pass_lock():\n"
        "    print('held', flush=True)\n"
        "    time.sleep(0.3)\n"
        "    Path(sys.argv[1]).write_text('x')\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", holder, str(released)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"other-{tmp_path.name}")
    with counter_pass_lock():
        assert not released.exists()  # other GPUs: no wait
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"test-{tmp_path.name}")
    with counter_pass_lock():
        assert released.exists()
    assert child.wait(timeout=30) == 0
    child.stdout.close()

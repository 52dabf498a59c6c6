"""What the NVIDIA counter pass needs before the GPU is involved: the CUDA toolkit's disassembler, and a
turn at the GPU's counters."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from intelliperf.errors import ToolMissingError
from intelliperf.gpu.nvidia.backend import NvidiaBackend
from intelliperf.gpu.nvidia.cupti_counters import counter_pass_lock
from intelliperf.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


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


def _flock_waiters(pid: int) -> set[str]:
    """The files (device:inode) whose flock process ``pid`` is waiting for, from /proc/locks."""
    waiting = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()[1:]
        if fields[:2] == ["->", "FLOCK"] and int(fields[4]) == pid:
            waiting.add(fields[5])
    return waiting


def _flocks_held(pid: int) -> set[str]:
    """The files (device:inode) that process ``pid`` holds a flock on, from /proc/locks."""
    return {
        fields[4]
        for fields in (line.split()[1:] for line in Path("/proc/locks").read_text().splitlines())
        if fields[0] == "FLOCK" and int(fields[3]) == pid
    }


def _pass_in_a_thread(released: Path) -> tuple[threading.Thread, threading.Event, list[bool]]:
    """A counter pass on a thread of this process: whether ``released`` existed once it held the lock."""
    entered, saw = threading.Event(), []

    def run() -> None:
        with counter_pass_lock():
            entered.set()
            saw.append(released.exists())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, entered, saw


def _took_the_lock(entered: threading.Event, lock: str) -> bool:
    """Wait until the thread's pass has either taken its lock (True) or is seen waiting for ``lock``, the
    child's (False). The loop only polls for whichever comes: no time decides which."""
    deadline = time.monotonic() + 60
    while not entered.is_set():
        if lock in _flock_waiters(os.getpid()):
            return False
        assert time.monotonic() < deadline, "the pass neither took a lock nor waited for one in 60 s"
        time.sleep(0.01)
    return True


def test_counter_passes_that_see_the_same_gpus_take_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second pass waits until the first has released the GPU's counters; one seeing other GPUs does not.
    The child holds the lock until told to let go; it is told only once the second pass is seen waiting for
    it (a blocked flock in /proc/locks), and marks ``released`` just before letting go."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"test-{tmp_path.name}")
    released = tmp_path / "released"
    holder = (
        "import sys\n"
        "from pathlib import Path\n"
        "from intelliperf.gpu.nvidia.cupti_counters import counter_pass_lock\n"
        "with counter_pass_lock():\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.readline()\n"
        "    Path(sys.argv[1]).write_text('x')\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", holder, str(released)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    ) as child:  # leaving it closes the child's stdin: it lets go of the lock however the test ends
        assert child.stdin is not None and child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        (lock,) = _flocks_held(child.pid)

        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"other-{tmp_path.name}")
        thread, entered, saw = _pass_in_a_thread(released)
        assert _took_the_lock(entered, lock), "a pass that sees other GPUs waited for the child's"
        thread.join(timeout=60)
        assert saw == [False]

        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"test-{tmp_path.name}")
        thread, entered, saw = _pass_in_a_thread(released)
        assert not _took_the_lock(entered, lock), "a second pass took the lock that the child holds"
        child.stdin.write("release\n")
        child.stdin.flush()
        thread.join(timeout=60)
        assert saw == [True]  # it took the lock once the child had let go, not before
        assert child.wait(timeout=30) == 0

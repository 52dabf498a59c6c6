"""The native library's pieces that need no GPU: its writers (compiled into a small harness and read back by
the Python readers) and InitializeInjection's refusal of a bad configuration without crashing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from accordo.build import SOURCE_DIR, cuda_home
from accordo.capture import read_capture

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, accordo_lib: Path) -> Path:
    out = tmp_path_factory.mktemp("harness") / "harness"
    home = cuda_home()
    cmd = [
        os.environ.get("CXX") or "g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
        f"-I{SOURCE_DIR}", f"-I{home / 'include'}",
        str(HERE / "native_harness.cpp"),
        str(SOURCE_DIR / "json_out.cpp"), str(SOURCE_DIR / "capture_file.cpp"), str(SOURCE_DIR / "log.cpp"),
        "-o", str(out), f"-L{home / 'lib64'}", f"-Wl,-rpath,{home / 'lib64'}", "-lcupti",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out


def test_json_escaping(harness: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    subprocess.run([str(harness), "json", str(out)], check=True)
    assert not Path(str(out) + ".tmp").exists()
    raw = out.read_bytes()
    raw.decode("utf-8")  # strictly valid UTF-8
    values = json.loads(raw)
    assert values == [
        "plain",
        "void k<float, 2>(float const*, int&)",
        'quote" backslash\\ slash/',
        "ctl\x01\x1f\n\t\r\b\f\x7f",
        "utf8 \u00e9 \u20ac \U0001f600",
        "bad \ufffd \ufffd \ufffd\ufffd\ufffd end",  # stray bytes and an encoded surrogate
        "nul\x00in",
    ]


def test_capture_writer_matches_reader(harness: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.bin"
    subprocess.run([str(harness), "capture", str(out)], check=True)
    cap = read_capture(out)
    assert cap.complete and not cap.truncated
    (launch,) = cap.launches
    assert (launch.launch_index, launch.seq, launch.name) == (5, 0, "_Z5scalePKfPfi")
    assert [p.kind for p in launch.params] == ["pointer", "pointer", "scalar", "unavailable"]
    assert launch.params[1].alloc_offset == 8 and launch.params[2].scalar(np.int32) == 4
    before = launch.buffer(1, "before")  # param 1 shares param 0's allocation
    assert before is not None and before.param_index == 0
    np.testing.assert_array_equal(before.view(np.float32), [1, 2, 3, 4])
    after = launch.buffer(0, "after")
    assert after is not None and after.tobytes() == bytes(16)
    assert launch.errors == ("copy failed \u00e9",)
    assert (launch.start_ns, launch.end_ns) == (100, 350)
    assert [(e.seq, e.message) for e in cap.errors] == [(0, "copy failed \u00e9"), (None, "global")]


INJECT = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print("rc", lib.InitializeInjection())
"""


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "ACCORDO_OUTPUT is not set"),
        ({"ACCORDO_MODE": "bogus", "ACCORDO_OUTPUT": "x"}, "ACCORDO_MODE must be"),
        ({"ACCORDO_MODE": "capture", "ACCORDO_OUTPUT": "x"}, "ACCORDO_KERNEL is not set"),
    ],
)
def test_injection_refuses_bad_configuration(accordo_lib: Path, env: dict[str, str], message: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith("ACCORDO_")}
    proc = subprocess.run(
        [sys.executable, "-c", INJECT, str(accordo_lib)],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "rc 1" in proc.stdout
    assert f"accordo: {message}" in proc.stderr


def test_injection_bad_regex_is_recorded(accordo_lib: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.bin"
    env = {**os.environ, "ACCORDO_MODE": "capture", "ACCORDO_OUTPUT": str(out), "ACCORDO_KERNEL": "(unclosed"}
    proc = subprocess.run(
        [sys.executable, "-c", INJECT, str(accordo_lib)], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "not a valid regex" in proc.stderr
    cap = read_capture(out)
    assert cap.complete and cap.launches == ()
    assert "(unclosed" in cap.errors[0].message and cap.errors[0].seq is None


def test_make_builds_too(tmp_path: Path) -> None:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    out = tmp_path / "libaccordo.so"
    proc = subprocess.run(
        ["make", "-s", "-C", str(SOURCE_DIR), f"OUT={out}", f"CUDA_HOME={cuda_home()}"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert out.is_file()
    assert "warning" not in proc.stderr

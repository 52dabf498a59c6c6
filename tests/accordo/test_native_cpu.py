"""The native library's pieces that need no GPU: its writers (compiled into a small harness and read back by
the Python readers) and InitializeInjection's refusal of a bad configuration without crashing."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from accordo.capture import read_capture
from accordo.timing import read_timing
from intelliperf.errors import ProfileError
from profiler.build import SOURCE_DIR, cuda_home
from profiler.trace import SETTINGS_VARIABLE

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class MakeBuild:
    """`make` run on the sources in their own folder (test_make_builds_too), still running or done."""

    process: subprocess.Popen[bytes]
    library: Path
    stderr: Path


@pytest.fixture(scope="session")
def make_build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MakeBuild | None]:
    """Starts `make` without waiting for it: the harness asks for this before native_lib, so the two builds
    of the library (each one compiler process) compile side by side. None when make is not installed."""
    if shutil.which("make") is None:
        yield None
        return
    folder = tmp_path_factory.mktemp("make")
    library, stderr = folder / "libintelliperf_profiler.so", folder / "make.stderr"
    with stderr.open("wb") as sink:
        process = subprocess.Popen(
            ["make", "-s", "-C", str(SOURCE_DIR), f"OUT={library}", f"CUDA_HOME={cuda_home()}"],
            stdout=subprocess.DEVNULL, stderr=sink,
        )  # fmt: skip
    yield MakeBuild(process, library, stderr)
    if process.poll() is None:  # the test did not run (deselected): stop it
        process.kill()
    process.wait()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, make_build: MakeBuild | None, native_lib: Path) -> Path:
    out = tmp_path_factory.mktemp("harness") / "harness"
    home = cuda_home()
    cmd = [
        os.environ.get("CXX") or "g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror",
        f"-I{SOURCE_DIR}", f"-I{home / 'include'}",
        str(HERE / "native_harness.cpp"),
        str(SOURCE_DIR / "json_out.cpp"), str(SOURCE_DIR / "capture_file.cpp"), str(SOURCE_DIR / "log.cpp"),
        str(SOURCE_DIR / "snapshot.cpp"), str(SOURCE_DIR / "worker_pool.cpp"),
        str(SOURCE_DIR / "cubin_symbols.cpp"),
        "-o", str(out), f"-L{home / 'lib64'}", f"-Wl,-rpath,{home / 'lib64'}", "-lcupti", "-pthread",
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
    assert launch.shape is not None
    assert (launch.shape.grid, launch.shape.block, launch.shape.dynamic_shared) == (
        (7, 2, 1),
        (256, 1, 1),
        4096,
    )
    assert (launch.shape.stream, launch.shape.per_thread, launch.shape.graph_capture) == (0x1234, True, False)
    assert (launch.shape.persisting_l2, launch.shape.module) == (9830400, 0)
    (module,) = cap.modules
    assert module.names == ("_Z5scalePKfPfi", "_Z5otherv") and module.image == b"\x7fELF not really"
    assert cap.module_of(launch) is module
    assert [(e.seq, e.message) for e in cap.errors] == [(0, "copy failed \u00e9"), (None, "global")]


def _records(path: Path) -> list[tuple]:
    """(type, seq, param, phase[, repeated record]) of the BUFFER (2) and SAME (6) records, in file order."""
    blob = path.read_bytes()
    pos, out = 16, []
    while pos < len(blob):
        rtype, _, length = struct.unpack_from("<IIQ", blob, pos)
        if rtype == 2:
            out.append((2, *struct.unpack_from("<QII", blob, pos + 16)))
        elif rtype == 6:
            seq, param, phase, _, _, *of = struct.unpack_from("<QIIQQQII", blob, pos + 16)
            out.append((6, seq, param, phase, tuple(of)))
        pos += 16 + length
    return out


def _script_snapshots() -> dict[tuple[int, int, str], bytes]:
    """The bytes native_harness.cpp's snapshot script copies, keyed by (seq, param, phase)."""
    a = (np.arange(1000) * 7).astype(np.uint8)
    b = (np.arange(1000) * 13 + 1).astype(np.uint8)
    c = np.arange(1, 9, dtype=np.uint8)
    out: dict[tuple[int, int, str], bytes] = {}
    out[0, 0, "before"], out[0, 1, "before"], out[0, 2, "before"] = a.tobytes(), b.tobytes(), c.tobytes()
    b[900] ^= 0xFF
    out[0, 0, "after"], out[0, 1, "after"], out[0, 2, "after"] = a.tobytes(), b.tobytes(), c.tobytes()
    out[1, 0, "before"], out[1, 1, "before"] = a.tobytes(), b.tobytes()
    b[0] ^= 0xFF
    out[1, 0, "after"], out[1, 1, "after"] = a.tobytes(), b.tobytes()
    out[2, 1, "before"] = b[:512].tobytes() + bytes(488)  # chunk 2 (of 256 bytes) failed to start
    out[2, 0, "after"] = a[:256].tobytes() + bytes(744)  # chunk 1 failed when waited for
    out[2, 1, "after"] = b.tobytes()
    out[3, 1, "before"], out[3, 0, "before"] = b.tobytes(), a.tobytes()
    return out


@pytest.mark.parametrize("mode", ["snapshot", "snapshot-nodedupe", "snapshot-unpinned"])
def test_snapshot_writer(harness: Path, tmp_path: Path, mode: str) -> None:
    out = tmp_path / "s.bin"
    proc = subprocess.run([str(harness), mode, str(out)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    if mode == "snapshot-unpinned":
        assert (
            "intelliperf-profiler: cannot page-lock the staging memory (fake pinning failed)" in proc.stderr
        )
    else:
        assert proc.stderr == ""
    cap = read_capture(out)
    assert cap.complete and not cap.truncated
    expected = _script_snapshots()
    got = {(b.seq, b.param_index, b.phase): b for x in cap.launches for b in x.buffers}
    assert set(got) == set(expected)
    for key, data in expected.items():
        assert got[key].tobytes() == data, key
        assert got[key].base == cap.launches[key[0]].params[key[1]].alloc_base
    assert [(e.seq, e.message) for e in cap.errors] == [
        (2, "fake copy failed copying parameter 1 before the kernel; bytes from offset 512 on are zeros"),
        (2, "fake wait failed copying parameter 0 after the kernel; bytes from offset 256 on are zeros"),
    ]
    records = _records(out)
    if mode == "snapshot-nodedupe":
        assert [r[0] for r in records] == [2] * len(expected)
        return
    assert records == [
        (2, 0, 0, 0), (2, 0, 1, 0), (2, 0, 2, 0),
        (6, 0, 0, 1, (0, 0, 0)), (2, 0, 1, 1), (2, 0, 2, 1),  # B differs in its last chunk; C is tiny
        (6, 1, 0, 0, (0, 0, 0)), (6, 1, 1, 0, (0, 1, 1)), (6, 1, 0, 1, (0, 0, 0)), (2, 1, 1, 1),
        (2, 2, 1, 0), (2, 2, 0, 1), (2, 2, 1, 1),  # failed copies are written in full and forgotten
        (6, 3, 1, 0, (2, 1, 1)), (2, 3, 0, 0),
    ]  # fmt: skip
    assert got[1, 1, "before"].file_offset == got[0, 1, "after"].file_offset


INJECT = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
print("rc", lib.InitializeInjection())
"""


def inject(
    library: Path, settings: dict[str, str] | None, tmp_path: Path, *, text: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Call the profiler's InitializeInjection in a fresh Python process whose environment names a settings
    file of ``settings`` (``text``: the file's text as given; ``settings`` None: no variable at all); the
    process must exit cleanly whatever the library makes of the configuration."""
    env = {k: v for k, v in os.environ.items() if k != SETTINGS_VARIABLE}
    if settings is not None:
        path = tmp_path / "settings"
        path.write_text(text if text is not None else "".join(f"{k}={v}\n" for k, v in settings.items()))
        env[SETTINGS_VARIABLE] = str(path)
    proc = subprocess.run(
        [sys.executable, "-c", INJECT, str(library)], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (None, "INTELLIPERF_PROFILER_SETTINGS is not set; the profiler is disabled"),
        ({}, "output is not set"),
        ({"mode": "bogus", "output": "x"}, "mode must be"),
        ({"mode": "capture", "output": "x"}, "kernel is not set in capture mode"),
        ({"mode": "time", "output": "x"}, "kernel is not set in time mode"),
        ({"mode": "counters", "output": "x"}, "kernels is not set in counters mode"),
        ({"mode": "counters", "output": "x", "kernels": "_Z1kv"}, "cubin_dir is not set in counters mode"),
        (
            {
                "mode": "counters",
                "output": "x",
                "kernels": "_Z1kv",
                "cubin_dir": "/tmp",
                "metrics_launch": "2",
            },
            "metrics_launch and sass_launch name the same launch",
        ),
        (
            {"mode": "trace", "output": "x", "ACCORDO_MODE": "capture"},
            "/settings:3 is not a known `key=value`",
        ),
    ],
)
def test_injection_refuses_bad_configuration(
    native_lib: Path, tmp_path: Path, settings: dict[str, str] | None, message: str
) -> None:
    proc = inject(native_lib, settings, tmp_path)
    assert "rc 1" in proc.stdout
    assert "intelliperf-profiler: " in proc.stderr and message in proc.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("mode=trace\noutput\n", "settings:2 is not a known `key=value` setting"),
        ("mode=trace\n=x\n", "settings:2 is not a known `key=value` setting"),
    ],
)
def test_a_settings_line_that_is_not_a_known_key_disables_the_profiler(
    native_lib: Path, tmp_path: Path, text: str, message: str
) -> None:
    proc = inject(native_lib, {}, tmp_path, text=text)
    assert "rc 1" in proc.stdout and message in proc.stderr


def test_a_settings_file_that_cannot_be_read_disables_the_profiler(native_lib: Path, tmp_path: Path) -> None:
    env = {**os.environ, SETTINGS_VARIABLE: str(tmp_path / "missing")}
    proc = subprocess.run(
        [sys.executable, "-c", INJECT, str(native_lib)], env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert "rc 1" in proc.stdout and f"cannot read the settings file {tmp_path / 'missing'}" in proc.stderr


def test_a_value_runs_to_the_end_of_its_line(native_lib: Path, tmp_path: Path) -> None:
    """A kernel regex may hold '=': only the first one separates key and value."""
    out = tmp_path / "t.jsonl"
    proc = inject(native_lib, {"mode": "time", "output": str(out), "kernel": "a=b(["}, tmp_path)
    assert "rc 1" in proc.stdout
    with pytest.raises(ProfileError, match=r"the profiler could not time the run: kernel='a=b\(\['"):
        read_timing(out)


def test_counters_mode_says_which_launch_number_it_could_not_read(native_lib: Path, tmp_path: Path) -> None:
    settings = {"mode": "counters", "output": "x", "kernels": "_Z1kv", "cubin_dir": "/", "sass_launch": "-1"}
    proc = inject(native_lib, settings, tmp_path)
    assert "sass_launch='-1' is not a launch number; using 2" in proc.stderr


@pytest.mark.parametrize("name", ["max_bytes", "capture_budget"])
@pytest.mark.parametrize("value", ["0", "-5", "12kB"])
def test_capture_mode_keeps_its_default_for_a_byte_count_it_cannot_read(
    native_lib: Path, tmp_path: Path, name: str, value: str
) -> None:
    output = str(tmp_path / "capture.bin")  # a usable configuration: the library writes its file
    proc = inject(native_lib, {"mode": "capture", "output": output, "kernel": "k", name: value}, tmp_path)
    default = {"max_bytes": 2 << 30, "capture_budget": 8 << 30}[name]
    assert f"{name}='{value}' is not a positive integer; using {default}" in proc.stderr


def test_injection_bad_regex_is_recorded(native_lib: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.bin"
    proc = inject(native_lib, {"mode": "capture", "output": str(out), "kernel": "(unclosed"}, tmp_path)
    assert "not a valid regex" in proc.stderr
    cap = read_capture(out)
    assert cap.complete and cap.launches == ()
    assert "(unclosed" in cap.errors[0].message and cap.errors[0].seq is None


def test_time_mode_bad_regex_is_recorded(native_lib: Path, tmp_path: Path) -> None:
    """A pattern C++'s std::regex refuses leaves a complete time file that says so, not a missing one (which
    would read as "CUDA never loaded the profiler")."""
    out = tmp_path / "t.jsonl"
    proc = inject(native_lib, {"mode": "time", "output": str(out), "kernel": "(unclosed"}, tmp_path)
    assert "rc 1" in proc.stdout and "not a valid regex" in proc.stderr
    with pytest.raises(ProfileError, match=r"the profiler could not time the run: kernel='\(unclosed'"):
        read_timing(out)


def test_make_builds_too(make_build: MakeBuild | None) -> None:
    if make_build is None:
        pytest.skip("make is not installed")
    returncode = make_build.process.wait(timeout=300)
    stderr = make_build.stderr.read_text()
    assert returncode == 0, stderr
    assert make_build.library.is_file()
    assert "warning" not in stderr


CUBIN = HERE.parent / "fixtures" / "cubin" / "two_kernels.cubin"


def test_cubin_symbols_lists_the_kernels_of_a_real_cubin(harness: Path) -> None:
    proc = subprocess.run([str(harness), "symbols", str(CUBIN)], capture_output=True, text=True, check=True)
    assert sorted(proc.stdout.split()) == ["_Z5scalePKfPfi", "plain_name"]


@pytest.mark.parametrize("cut", [0, 16, 63, 64, 1000, -1])
def test_cubin_symbols_of_a_cut_or_foreign_image_are_none_or_a_subset(
    harness: Path, tmp_path: Path, cut: int
) -> None:
    """A cut image (its section headers sit at the end) or an ELF header with nothing behind it gives no
    names, and the reader stays inside the bytes it was given."""
    image = CUBIN.read_bytes()
    cut_image = tmp_path / "cut.bin"
    cut_image.write_bytes(image[:cut] if cut >= 0 else b"\x7fELF" + bytes(60))
    proc = subprocess.run(
        [str(harness), "symbols", str(cut_image)], capture_output=True, text=True, check=True
    )
    assert proc.stdout == ""


def code_hashes(harness: Path, cubin: Path) -> dict[str, str]:
    proc = subprocess.run([str(harness), "code", str(cubin)], capture_output=True, text=True, check=True)
    return dict(line.split() for line in proc.stdout.splitlines())


def nvcc_cubin(source: str, folder: Path, name: str = "two_kernels.cu") -> Path:
    """``source`` compiled to a cubin in ``folder`` with line information (which holds the file's path)."""
    nvcc = cuda_home() / "bin" / "nvcc"
    if not nvcc.is_file():
        pytest.skip(f"no nvcc at {nvcc}: the CUDA toolkit's compiler builds the cubins this test compares")
    folder.mkdir(parents=True)
    (folder / name).write_text(source)
    cubin = folder / "k.cubin"
    subprocess.run(
        [str(nvcc), "-cubin", "-arch=sm_90", "-O3", "-lineinfo", str(folder / name), "-o", str(cubin)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cubin


def test_a_kernels_code_hash_ignores_where_it_was_built_and_follows_its_code(
    harness: Path, tmp_path: Path
) -> None:
    """Two builds of one source in different folders (their line tables name different paths, so the cubins
    differ) hash each kernel alike; a change to one kernel changes that kernel's hash only."""
    source = (CUBIN.parent / "two_kernels.cu").read_text()
    here = nvcc_cubin(source, tmp_path / "a" / "deep" / "checkout")
    there = nvcc_cubin(source, tmp_path / "b")
    changed = nvcc_cubin(source.replace("= 1.0f;", "= 3.0f;"), tmp_path / "c")
    assert here.read_bytes() != there.read_bytes()
    first, second, third = (code_hashes(harness, cubin) for cubin in (here, there, changed))
    assert sorted(first) == ["_Z5scalePKfPfi", "plain_name"]
    assert all(len(value) == 16 and int(value, 16) >= 0 for value in first.values())
    assert first == second
    assert third["_Z5scalePKfPfi"] == first["_Z5scalePKfPfi"]
    assert third["plain_name"] != first["plain_name"]


@pytest.mark.parametrize("cut", [0, 63, 1000, -1])
def test_code_hashes_of_a_cut_or_foreign_image_are_none(harness: Path, tmp_path: Path, cut: int) -> None:
    image = CUBIN.read_bytes()
    cut_image = tmp_path / "cut.bin"
    cut_image.write_bytes(image[:cut] if cut >= 0 else b"\x7fELF" + bytes(60))
    assert code_hashes(harness, cut_image) == {}

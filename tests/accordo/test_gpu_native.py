"""End-to-end on a GPU: trace and capture a small CUDA program built with the static CUDA runtime, and a
Triton kernel (cuLaunchKernelEx) when PyTorch and Triton are installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from accordo.capture import run_capture
from accordo.timing import run_timed
from intelliperf.errors import AppError, ProfileError
from intelliperf.process import JIT_CACHE
from profiler.trace import run_traced

HERE = Path(__file__).resolve().parent
SCALE = "scale(float const*, float*, int)"
ADD_ONE = "void add_one<float>(float*, int)"

pytestmark = pytest.mark.gpu


def build_sample(source: str, folder: Path) -> Path:
    """sample_app.cu's ``source`` built with line information in ``folder`` (whose path the cubin records)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    folder.mkdir(parents=True)
    (folder / "sample_app.cu").write_text(source)
    out, source_file = folder / "sample_app", folder / "sample_app.cu"
    cmd = [nvcc, "-cudart", "static", "-lineinfo", "-arch=sm_90", "-o", str(out), str(source_file)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def sample_app(gpu: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc is not installed")
    return build_sample((HERE / "sample_app.cu").read_text(), tmp_path_factory.mktemp("app") / "src")


@pytest.fixture(scope="module")
def per_thread_app(sample_app: Path) -> Path:
    """sample_app built with --default-stream per-thread: its launches come through the _ptsz entry points."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    out = sample_app.parent / "sample_app_ptsz"
    cmd = [nvcc, "-cudart", "static", "--default-stream", "per-thread", "-arch=sm_90", "-o", str(out),
           str(HERE / "sample_app.cu")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize(
    ("app", "mode"), [("sample_app", "ok"), ("sample_app", "exit"), ("per_thread_app", "ok")]
)
def test_time_sample(
    request: pytest.FixtureRequest, native_lib: Path, tmp_path: Path, app: str, mode: str
) -> None:
    """Time mode times exactly the launches of the matching kernel, in order, however the program ends and
    whichever default stream it launches on; the others run untimed."""
    binary = request.getfixturevalue(app)
    run = run_timed([str(binary), mode], kernel_regex="^_Z5scalePKfPfi$", cwd=tmp_path, timeout_s=120,
                    library=native_lib)  # fmt: skip
    assert run.stdout.strip() == "ok"
    assert [(x.name, x.index) for x in run.launches] == [("_Z5scalePKfPfi", i) for i in range(3)]
    assert {x.demangled for x in run.launches} == {SCALE}
    assert all(0 < x.duration_ns < 5e6 for x in run.launches)
    both = run_timed([str(binary), mode], kernel_regex="scale|add_one", cwd=tmp_path, timeout_s=120,
                     library=native_lib)  # fmt: skip
    assert [x.demangled for x in both.launches] == [SCALE] * 3 + [ADD_ONE] * 2
    assert both.wall_s < 4.0  # a gate that never opened would hold each of the 5 launches for 1 s


@pytest.mark.parametrize("loading", ["LAZY", "EAGER"])
@pytest.mark.parametrize(
    ("mode", "launches"), [("ok", 3), ("once", 1), ("threads", 12), ("exit", 3), ("reset", 4)]
)
def test_time_never_stalls(
    sample_app: Path, native_lib: Path, tmp_path: Path, loading: str, mode: str, launches: int
) -> None:
    """Under lazy module loading (CUDA's default) a function's first launch loads its module inside the
    launch call, and that load waits for work queued on the device: the gate queued ahead of the launch
    must not be that work. The process's first kernel, a kernel launched once, four threads' concurrent
    first launches and a launch after a device reset are all timed, in both loading modes, and no launch
    waits out the gate's one-second limit: the timed run takes less than a second longer than the same
    program run plainly just before or just after it, the slower of the two (a device reset alone took
    3-5 s on a loaded host, and a host's load drifts)."""
    env = {"CUDA_MODULE_LOADING": loading}

    def plain_wall_s() -> float:
        began = time.perf_counter()
        plain = subprocess.run([str(sample_app), mode], cwd=tmp_path, env={**os.environ, **env},
                               capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert plain.returncode == 0 and plain.stdout.strip() == "ok", plain.stderr
        return time.perf_counter() - began

    before_s = plain_wall_s()
    run = run_timed([str(sample_app), mode], kernel_regex="^_Z5scalePKfPfi$", cwd=tmp_path, timeout_s=120,
                    library=native_lib, env=env)  # fmt: skip
    after_s = plain_wall_s()
    assert run.stdout.strip() == "ok"
    assert sorted(x.index for x in run.launches) == list(range(launches))
    assert all(0 < x.duration_ns < 5e6 for x in run.launches)
    # a stalled launch is reported ("could not be timed": ProfileError above) and costs a whole second
    assert run.wall_s < max(before_s, after_s) + 1.0


def test_time_graph_launch_is_reported(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    """A launch captured into a CUDA graph cannot be timed by events: the run says so instead of timing
    fewer launches than ran."""
    untouched = run_timed([str(sample_app), "graph"], kernel_regex="scale", cwd=tmp_path, timeout_s=120,
                          library=native_lib)  # fmt: skip
    assert len(untouched.launches) == 3
    with pytest.raises(ProfileError, match=r"launch 1 of void add_one<float>.*captured into a CUDA graph"):
        run_timed([str(sample_app), "graph"], kernel_regex="add_one", cwd=tmp_path, timeout_s=120,
                  library=native_lib)  # fmt: skip


@pytest.mark.parametrize("loading", ["LAZY", "EAGER"])
def test_time_a_first_launch_inside_a_graph_capture(
    sample_app: Path, native_lib: Path, tmp_path: Path, loading: str
) -> None:
    """The kernel's first launch is captured into a graph: time mode reports it and leaves the capture
    alone (no load, no gate inside it), so the application's graph still builds and runs (exit 0)."""
    env = {"CUDA_MODULE_LOADING": loading}
    with pytest.raises(ProfileError, match=r"launch 0 of scale.*captured into a CUDA graph"):
        run_timed([str(sample_app), "graphfirst"], kernel_regex="scale", cwd=tmp_path, timeout_s=120,
                  library=native_lib, env=env)  # fmt: skip
    untimed = run_timed([str(sample_app), "graphfirst"], kernel_regex="add_one", cwd=tmp_path, timeout_s=120,
                        library=native_lib, env=env)  # fmt: skip
    assert untimed.stdout.strip() == "ok" and untimed.launches == ()


def test_time_across_a_device_reset(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    """cudaDeviceReset destroys the context with its events and the gate's module: the launches before it
    are read first, and the one after it is timed in the new context."""
    run = run_timed([str(sample_app), "reset"], kernel_regex="^_Z5scalePKfPfi$", cwd=tmp_path, timeout_s=120,
                    library=native_lib)  # fmt: skip
    assert [x.index for x in run.launches] == [0, 1, 2, 3]
    assert all(0 < x.duration_ns < 5e6 for x in run.launches)


def test_time_crash_is_app_error(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(AppError, match="exited with code 1"):
        run_timed([str(sample_app), "crash"], kernel_regex="scale", cwd=tmp_path, timeout_s=120,
                  library=native_lib)  # fmt: skip


@pytest.mark.parametrize("mode", ["ok", "exit"])
def test_trace_sample(sample_app: Path, native_lib: Path, tmp_path: Path, mode: str) -> None:
    run = run_traced([str(sample_app), mode], cwd=tmp_path, timeout_s=120, library=native_lib)
    assert run.stdout.strip() == "ok"
    by_name = {s.demangled: s for s in run.stats}
    assert set(by_name) == {SCALE, ADD_ONE}
    assert by_name[SCALE].launches == 3 and by_name[SCALE].name == "_Z5scalePKfPfi"
    assert by_name[ADD_ONE].launches == 2
    for launch in run.launches:
        assert launch.duration_ns > 0
        assert launch.grid == (8, 1, 1) and launch.block == (128, 1, 1)
        assert launch.regs > 0
    assert len({x.corr for x in run.launches}) == 5
    assert [x.start for x in run.launches] == sorted(x.start for x in run.launches)


def test_trace_gives_each_kernel_a_code_hash_that_follows_its_code_not_its_build(
    sample_app: Path, native_lib: Path, tmp_path: Path
) -> None:
    """The same source built in another folder traces with the same code hashes; a change to one kernel
    changes that kernel's hash only (issue 43: reuse by content hash)."""
    source = (HERE / "sample_app.cu").read_text()
    elsewhere = build_sample(source, tmp_path / "another" / "checkout")
    rescaled = source.replace("2.0f * in[i] + 1.0f", "3.0f * in[i] + 1.0f")
    # the host's check of the result follows the kernel (host code is in no kernel's section)
    rescaled = rescaled.replace("expected = 2.0f * 0.5f", "expected = 3.0f * 0.5f")
    assert rescaled.count("3.0f") == source.count("3.0f") + 2
    changed = build_sample(rescaled, tmp_path / "changed")
    hashes = []
    for binary in (sample_app, elsewhere, changed):
        run = run_traced([str(binary), "ok"], cwd=tmp_path, timeout_s=120, library=native_lib)
        hashes.append({s.demangled: s.code_hash for s in run.stats})
    first, second, third = hashes
    assert set(first) == {SCALE, ADD_ONE}
    assert all(code is not None and len(code) == 16 for code in first.values()), first
    assert first == second
    assert third[ADD_ONE] == first[ADD_ONE] and third[SCALE] != first[SCALE]


def test_trace_stats_line(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    """The stats setting adds one line on stderr with CUPTI's set-up and flush times; the trace is the
    same."""
    quiet = run_traced([str(sample_app), "ok"], cwd=tmp_path, timeout_s=120, library=native_lib)
    assert "intelliperf-profiler:" not in quiet.stderr
    run = run_traced(
        [str(sample_app), "ok"], cwd=tmp_path, timeout_s=120, library=native_lib, settings={"stats": "1"}
    )
    lines = [line for line in run.stderr.splitlines() if line.startswith("intelliperf-profiler: ")]
    assert len(lines) == 1 and lines[0].startswith("intelliperf-profiler: trace stats: set-up "), run.stderr
    assert "; 5 kernel records in 1 buffers" in lines[0]
    assert sorted((s.demangled, s.launches) for s in run.stats) == sorted(
        (s.demangled, s.launches) for s in quiet.stats
    )


def test_a_sampled_trace_counts_every_launch_and_records_the_samples(
    sample_app: Path, native_lib: Path, tmp_path: Path
) -> None:
    """sample_first=1, sample_every=2: each kernel's launches 1, 3, 5, ... get a record, the others are
    counted (scale runs 3 times, add_one twice: 3 records, 2 unrecorded), so the launch counts are those of
    the full trace; graph launches are all recorded (FORMAT.md, "Sampled launches")."""
    sampling = {"sample_first": "1", "sample_every": "2", "stats": "1"}
    full = run_traced([str(sample_app), "ok"], cwd=tmp_path, timeout_s=120, library=native_lib)
    run = run_traced(
        [str(sample_app), "ok"], cwd=tmp_path, timeout_s=120, library=native_lib, settings=sampling
    )
    assert run.stdout.strip() == "ok"
    assert sorted((s.demangled, s.launches) for s in run.stats) == sorted(
        (s.demangled, s.launches) for s in full.stats
    )
    assert len(run.launches) == 3 and [sum(t.unrecorded) for t in run.tables] == [2]
    assert "intelliperf-profiler: trace sampling: 5 launches counted, 2 unrecorded;" in run.stderr, run.stderr
    by_name = {s.demangled: s for s in run.stats}
    # two recorded launches and one at their mean, rounded to whole nanoseconds
    assert abs(by_name[SCALE].total_ns - by_name[SCALE].mean_ns * 3) <= 0.5
    graph = run_traced(
        [str(sample_app), "graph"], cwd=tmp_path, timeout_s=120, library=native_lib, settings=sampling
    )
    every = run_traced([str(sample_app), "graph"], cwd=tmp_path, timeout_s=120, library=native_lib)
    assert sorted((s.demangled, s.launches) for s in graph.stats) == sorted(
        (s.demangled, s.launches) for s in every.stats
    )


def test_trace_crash_is_app_error(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    with pytest.raises(AppError, match="exited with code 1"):
        run_traced([str(sample_app), "crash"], cwd=tmp_path, timeout_s=120, library=native_lib)


def test_capture_scale(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    n = 1000
    run = run_capture(
        [str(sample_app), "ok", str(n)],
        kernel_regex=r"^scale\(",
        cwd=tmp_path,
        timeout_s=120,
        library=native_lib,
    )
    assert run.status == "ok", run.stderr
    cap = run.capture
    assert cap is not None and cap.complete and cap.errors == ()
    assert [x.launch_index for x in cap.launches] == [0, 1, 2]
    x_host = np.arange(n, dtype=np.float32) * 0.5
    for launch in cap.launches:
        assert launch.demangled == SCALE and launch.complete
        p_in, p_out, p_n = launch.params
        assert p_in.kind == "pointer" and p_out.kind == "pointer"
        assert p_in.alloc_size == 4 * n and p_out.alloc_size == 4 * n
        assert p_n.kind == "scalar" and p_n.scalar(np.int32) == n
        before_in, after_in = launch.buffer(0, "before"), launch.buffer(0, "after")
        assert before_in is not None and after_in is not None
        np.testing.assert_array_equal(before_in.view(np.float32), x_host)
        assert before_in.tobytes() == after_in.tobytes()
        after_out = launch.buffer(1, "after")
        assert after_out is not None
        np.testing.assert_array_equal(after_out.view(np.float32), 2 * x_host + 1)
        assert launch.start_ns is not None and launch.duration_ns is not None and launch.duration_ns > 0
    first_out = cap.launches[0].buffer(1, "before")
    assert first_out is not None and not first_out.data.any()  # cudaMemset(out, 0) before the first launch


@pytest.mark.parametrize("dedupe", [True, False])
def test_capture_large_buffers(sample_app: Path, native_lib: Path, tmp_path: Path, dedupe: bool) -> None:
    """20 MB buffers: copied in two chunks through the staging buffers; with deduplication the unchanged
    snapshots are SAME records sharing the bytes of the snapshot they repeat."""
    n = 5_000_000
    out_dir = tmp_path / "out"
    run = run_capture(
        [str(sample_app), "ok", str(n)],
        kernel_regex=r"^scale\(",
        cwd=tmp_path,
        settings={"dedup": "1" if dedupe else "0"},
        timeout_s=120,
        library=native_lib,
        output_dir=out_dir,
    )
    assert run.status == "ok", run.stderr
    assert "intelliperf-profiler:" not in run.stderr, run.stderr
    cap = run.capture
    assert cap is not None and cap.complete and cap.errors == ()
    x_host = np.arange(n, dtype=np.float32) * 0.5
    offsets = set()
    for launch in cap.launches:
        assert launch.complete
        before_in, after_in = launch.buffer(0, "before"), launch.buffer(0, "after")
        before_out, after_out = launch.buffer(1, "before"), launch.buffer(1, "after")
        assert before_in and after_in and before_out and after_out
        np.testing.assert_array_equal(before_in.view(np.float32), x_host)
        np.testing.assert_array_equal(after_in.view(np.float32), x_host)
        np.testing.assert_array_equal(after_out.view(np.float32), 2 * x_host + 1)
        offsets |= {b.file_offset for b in launch.buffers}
    assert not cap.launches[0].buffer(1, "before").data.any()
    (path,) = out_dir.glob("capture-*.bin")
    if dedupe:  # in, zeros, 2x+1: three BUFFER records; the nine other snapshots repeat them
        assert len(offsets) == 3
        assert 12 * n < path.stat().st_size < 13 * n
    else:
        assert len(offsets) == 12
        assert path.stat().st_size > 48 * n


def test_capture_max_bytes(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    run = run_capture(
        [str(sample_app), "ok", "1000"],
        kernel_regex="add_one",
        cwd=tmp_path,
        timeout_s=120,
        max_bytes=64,
        library=native_lib,
    )
    assert run.status == "ok" and run.capture is not None
    assert [x.demangled for x in run.capture.launches] == [ADD_ONE, ADD_ONE]
    for launch in run.capture.launches:
        assert {b.nbytes for b in launch.buffers} == {64}


def test_capture_faulting_kernel(sample_app: Path, native_lib: Path, tmp_path: Path) -> None:
    run = run_capture(
        [str(sample_app), "crash"],
        kernel_regex="bad_write",
        cwd=tmp_path,
        timeout_s=120,
        library=native_lib,
    )
    assert run.status == "crash" and run.returncode == 1
    assert run.capture is not None
    (launch,) = run.capture.launches
    assert launch.demangled == "bad_write(float*)"
    assert launch.buffer(0, "before") is not None and launch.buffer(0, "after") is None
    assert any("CUDA_ERROR_ILLEGAL_ADDRESS" in e for e in launch.errors), launch.errors


TRITON_APP = """
import torch, triton, triton.language as tl

@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

x = torch.arange(1000, device="cuda", dtype=torch.float32)
y = torch.ones_like(x)
out = torch.zeros_like(x)
for _ in range(2):
    add_kernel[(4,)](x, y, out, 1000, BLOCK=256)
torch.cuda.synchronize()
print(out[-1].item())
"""


def test_triton_kernel(gpu: None, native_lib: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    app = tmp_path / "triton_app.py"
    app.write_text(textwrap.dedent(TRITON_APP))
    traced = run_traced([sys.executable, str(app)], cwd=tmp_path, timeout_s=300, library=native_lib)
    stats = {s.name: s for s in traced.stats}
    assert stats["add_kernel"].launches == 2
    run = run_capture(
        [sys.executable, str(app)],
        kernel_regex="^add_kernel$",
        cwd=tmp_path,
        timeout_s=300,
        library=native_lib,
    )
    assert run.status == "ok" and run.capture is not None and run.capture.complete
    assert len(run.capture.launches) == 2
    launch = run.capture.launches[0]
    x, y, out, n = launch.params[:4]
    assert [p.kind for p in (x, y, out)] == ["pointer"] * 3 and n.scalar(np.int32) == 1000
    after = launch.buffer(out.index, "after")  # the caching allocator may put all three in one block
    assert after is not None
    assert out.alloc_offset is not None
    values = after.view(np.float32, byte_offset=out.alloc_offset - (after.base - out.alloc_base), count=1000)
    np.testing.assert_array_equal(values, np.arange(1000, dtype=np.float32) + 1)
    timed = run_timed([sys.executable, str(app)], kernel_regex="^add_kernel$", cwd=tmp_path, timeout_s=300,
                      library=native_lib)  # fmt: skip
    assert [x.index for x in timed.launches] == [0, 1]  # cuLaunchKernelEx, on PyTorch's stream


def test_a_triton_kernels_code_hash_follows_its_code_not_its_compilation(
    gpu: None, native_lib: Path, tmp_path: Path
) -> None:
    """Triton compiles the kernel afresh in each of two folders (a traced run keeps Triton's cache in its
    working folder: intelliperf.process.with_jit_cache): the same code hash both times (its compiled
    cubin's own section, not where or when it was compiled); a kernel that subtracts instead of adding
    hashes otherwise (issue 43: for Triton, the compiled kernel's hash). The trace keeps each launch's
    duration."""
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    source = textwrap.dedent(TRITON_APP)
    changed = source.replace("mask=m) + tl.load(y_ptr", "mask=m) - tl.load(y_ptr")
    assert changed != source
    runs = []
    for name, text in (("first", source), ("second", source), ("changed", changed)):
        app = tmp_path / name / "triton_app.py"
        app.parent.mkdir()
        app.write_text(text)
        run = run_traced([sys.executable, str(app)], cwd=app.parent, timeout_s=300, library=native_lib)
        cache = app.parent / JIT_CACHE
        assert any(cache.rglob("*.cubin")), f"Triton did not compile into {cache}"
        runs.append({s.name: s for s in run.stats}["add_kernel"])
    first, second, changed_run = runs
    assert first.code_hash is not None and len(first.code_hash) == 16
    assert second.code_hash == first.code_hash and changed_run.code_hash != first.code_hash
    assert first.shape_hash == second.shape_hash == changed_run.shape_hash
    assert len(first.launch_ns) == first.launches == 2 and all(ns > 0 for ns in first.launch_ns)

"""benchmarks/event_harness.py: parameter rewriting and nvcc on the CPU; loading, timing and the copied
inputs on the GPU."""

from __future__ import annotations

import mmap
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from accordo.capture import Buffer, Launch, Param
from accordo.cubin_variables import device_variables
from benchmarks.event_harness import (
    EventHarness,
    _allocations,
    compile_cubin,
    dynamic_smem,
    param_blob,
)

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")

SCALE = """
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
SCALE_NAME = "_Z5scalePKfPfi"

# 64 KiB of dynamic shared memory: needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
STAGE = """
__global__ void stage(const float* x, float* y, int n) {
    extern __shared__ float tile[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? x[i] : 0.0f;
    tile[16383 - threadIdx.x] = 1.0f;
    __syncthreads();
    if (i < n) y[i] = tile[threadIdx.x] + tile[16383 - threadIdx.x];
}
"""
STAGE_NAME = "_Z5stagePKfPfi"

# a module variable each launch takes a ticket from: every launch should see the count the module loaded with
TICKETS = """
__device__ unsigned int g_tickets;
extern "C" __global__ void take_ticket(unsigned int* out) { out[0] = atomicAdd(&g_tickets, 1u); }
"""

# a template kernel launched with a __device__ lambda (examples/tile_sums): needs --extended-lambda
LAMBDA = """
template <typename F>
__global__ void for_each_index(int n, F f) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) f(i);
}
void run(float* y, int n) {
    for_each_index<<<(n + 127) / 128, 128>>>(n, [=] __device__(int i) { y[i] = 2.0f * i; });
}
"""


def pointer(index: int, base: int, offset: int, size: int) -> Param:
    return Param(index, index * 8, 8, "pointer", struct.pack("<Q", base + offset), base + offset, base, size)


def scalar(index: int, offset: int, raw: bytes) -> Param:
    return Param(index, offset, len(raw), "scalar", raw)


def make_launch(
    tmp_path: Path,
    params: tuple[Param, ...],
    snapshots: dict[int, tuple[int, bytes]] | None = None,
    name: str = "_Z1kv",
) -> Launch:
    """A Launch whose 'before' buffers are ``param_index -> (device base, bytes)``, read from a memory map
    of a temporary file like a real capture."""
    snapshots = snapshots or {}
    path = tmp_path / "capture.bin"
    blob = b"".join(data for _, data in snapshots.values())
    path.write_bytes(blob or b"\0")
    with path.open("rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    buffers, offset = [], 0
    for index, (base, payload) in snapshots.items():
        buffers.append(Buffer(0, index, "before", base, len(payload), offset, data))
        offset += len(payload)
    return Launch(0, 0, name, name, params, tuple(buffers), (), None, None)


# ----------------------------------------------------------------------------------------------------------
# Parameter array


A, B = 0x7F00_0000_0000, 0x7F00_1000_0000


def test_param_blob_rewrites_pointers_and_keeps_scalars(tmp_path: Path) -> None:
    params = (
        pointer(0, A, 0, 4096),
        pointer(1, A, 256, 4096),  # same allocation, 256 bytes in
        pointer(2, B, 24, 100),
        scalar(3, 24, struct.pack("<i", 1000)),
        scalar(4, 32, struct.pack("<d", 0.5)),
        scalar(5, 40, bytes(range(12))),  # a 12-byte struct
    )
    launch = make_launch(tmp_path, params)
    blobs = param_blob(launch, {A: 0x5000_0000, B: 0x6000_0000})
    assert blobs == [
        struct.pack("<Q", 0x5000_0000),
        struct.pack("<Q", 0x5000_0100),
        struct.pack("<Q", 0x6000_0018),
        struct.pack("<i", 1000),
        struct.pack("<d", 0.5),
        bytes(range(12)),
    ]


def test_param_blob_orders_by_index(tmp_path: Path) -> None:
    launch = make_launch(tmp_path, (scalar(1, 8, b"\x02" * 4), pointer(0, A, 8, 64)))
    assert param_blob(launch, {A: 0x1000}) == [struct.pack("<Q", 0x1008), b"\x02" * 4]


def test_param_blob_unavailable_parameter(tmp_path: Path) -> None:
    launch = make_launch(tmp_path, (pointer(0, A, 0, 64), Param(1, 8, 4, "unavailable", b"")))
    with pytest.raises(ValueError, match="parameter 1 is unavailable"):
        param_blob(launch, {A: 0x1000})


def test_param_blob_pointer_without_replacement(tmp_path: Path) -> None:
    launch = make_launch(tmp_path, (pointer(0, A, 0, 64), pointer(1, B, 0, 64)))
    with pytest.raises(ValueError, match="no replacement"):
        param_blob(launch, {A: 0x1000})


def test_param_blob_index_gap(tmp_path: Path) -> None:
    launch = make_launch(tmp_path, (scalar(0, 0, b"\0" * 4), scalar(2, 8, b"\0" * 4)))
    with pytest.raises(ValueError, match=r"are not 0\.\.1"):
        param_blob(launch, {})


def test_allocations_are_deduplicated(tmp_path: Path) -> None:
    launch = make_launch(
        tmp_path,
        (pointer(0, A, 0, 4096), scalar(1, 8, b"\0" * 4), pointer(2, A, 512, 4096), pointer(3, B, 0, 100)),
    )
    assert _allocations(launch) == {A: (4096, 0), B: (100, 3)}


def test_buffer_fixture_reads_back(tmp_path: Path) -> None:
    """The test's own Launch builder: buffers found through the deduplicating owner parameter."""
    x = np.arange(4, dtype=np.float32).tobytes()
    launch = make_launch(tmp_path, (pointer(0, A, 0, 16), pointer(1, A, 8, 16)), {0: (A, x)})
    buffer = launch.buffer(1, "before")
    assert buffer is not None and buffer.tobytes() == x
    assert buffer.data.dtype == np.uint8 and buffer.data.nbytes == 16


def test_dynamic_smem() -> None:
    assert dynamic_smem(0, 0) == 0
    assert dynamic_smem(65536 + 1024, 1024) == 65536
    with pytest.raises(ValueError, match="static shared memory"):
        dynamic_smem(512, 1024)


def test_harness_needs_the_with_block(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="not entered"):
        EventHarness().load(tmp_path / "k.cubin", "k")


# ----------------------------------------------------------------------------------------------------------
# nvcc


def test_time_batched_needs_a_launch_and_a_round() -> None:
    harness = EventHarness()
    for launches, rounds in ((0, 1), (1, 0)):
        with pytest.raises(ValueError, match="at least 1"):
            harness.time_batched(None, launches=launches, rounds=rounds)  # type: ignore[arg-type]


def test_compile_cubin_missing_nvcc(tmp_path: Path) -> None:
    source = tmp_path / "k.cu"
    source.write_text(SCALE)
    with pytest.raises(RuntimeError, match="nvcc not found"):
        compile_cubin(source, tmp_path / "k.cubin", nvcc="/nonexistent/nvcc")


@needs_nvcc
def test_compile_cubin_error_has_the_compiler_output(tmp_path: Path) -> None:
    source = tmp_path / "bad.cu"
    source.write_text("__global__ void k(float* y) { y[0] = undeclared_name; }\n")
    with pytest.raises(RuntimeError, match=r"(?s)nvcc failed with exit code \d+.*undeclared_name"):
        compile_cubin(source, tmp_path / "bad.cubin")
    assert not (tmp_path / "bad.cubin").exists()


@needs_nvcc
def test_compile_cubin_takes_a_kernel_launched_with_a_device_lambda(tmp_path: Path) -> None:
    source = tmp_path / "lambda.cu"
    source.write_text(LAMBDA)
    data = compile_cubin(source, tmp_path / "lambda.cubin").read_bytes()
    assert data[:4] == b"\x7fELF"
    assert b"for_each_index" in data


@needs_nvcc
def test_the_cubin_names_the_module_variable_the_harness_restores(tmp_path: Path) -> None:
    source = tmp_path / "tickets.cu"
    source.write_text(TICKETS)
    assert device_variables(compile_cubin(source, tmp_path / "t.cubin").read_bytes()) == ["g_tickets"]


@needs_nvcc
def test_compile_cubin(tmp_path: Path) -> None:
    source = tmp_path / "scale.cu"
    source.write_text(SCALE)
    out = compile_cubin(source, tmp_path / "sub" / "scale.cubin")
    assert out == tmp_path / "sub" / "scale.cubin"
    data = out.read_bytes()
    assert data[:4] == b"\x7fELF"
    assert SCALE_NAME.encode() in data


# ----------------------------------------------------------------------------------------------------------
# GPU

N = 1000
X_BASE, Y_BASE = 0x7F00_0000_0000, 0x7F00_0020_0000
X_OFFSET, Y_OFFSET = 128, 64  # the pointers point into the middle of their allocations
SENTINEL = 0xAB


def scale_launch(tmp_path: Path, name: str) -> tuple[Launch, np.ndarray]:
    """x: a capped snapshot (starting at the pointer, not at the allocation); y: the whole allocation,
    filled with a sentinel the kernel must leave alone outside y[0:n]."""
    x = (np.arange(N, dtype=np.float32) * 0.25 - 7.0).astype(np.float32)
    x_size, y_size = X_OFFSET + N * 4 + 32, Y_OFFSET + N * 4 + 32
    params = (
        pointer(0, X_BASE, X_OFFSET, x_size),
        pointer(1, Y_BASE, Y_OFFSET, y_size),
        scalar(2, 16, struct.pack("<i", N)),
    )
    snapshots = {0: (X_BASE + X_OFFSET, x.tobytes()), 1: (Y_BASE, bytes([SENTINEL]) * y_size)}
    return make_launch(tmp_path, params, snapshots, name=name), x


@pytest.mark.gpu
@needs_nvcc
@pytest.mark.parametrize(
    ("source", "name", "smem", "expect"),
    [(SCALE, SCALE_NAME, 0, lambda x: 2.0 * x), (STAGE, STAGE_NAME, 65536, lambda x: x + 1.0)],
    ids=["scale", "stage-64KiB-dynamic-smem"],
)
def test_gpu_time_and_output(
    tmp_path: Path, source: str, name: str, smem: int, expect: Callable[[np.ndarray], np.ndarray]
) -> None:
    src = tmp_path / "k.cu"
    src.write_text(source)
    cubin = compile_cubin(src, tmp_path / "k.cubin")
    launch, x = scale_launch(tmp_path, name)
    block = (128, 1, 1)
    grid = ((N + 127) // 128, 1, 1)
    with EventHarness() as harness:
        kernel = harness.load(cubin, name)
        assert kernel.static_smem == 0
        prepared = harness.prepare(kernel, launch, grid, block, smem)
        assert prepared.dynamic_smem == smem
        assert set(prepared.new_bases) == {X_BASE, Y_BASE}

        before = harness.download(prepared, 1)
        assert before == bytes([SENTINEL]) * len(before)

        times = harness.time(prepared, iterations=30, warmup=3)
        assert len(times) == 30
        assert all(t > 0 for t in times)
        assert max(times) < 1e9  # under a second: the values are ns, not ms

        y = harness.download(prepared, 1)
        assert len(y) == Y_OFFSET + N * 4 + 32
        assert y[:Y_OFFSET] == bytes([SENTINEL]) * Y_OFFSET
        assert y[Y_OFFSET + N * 4 :] == bytes([SENTINEL]) * 32
        np.testing.assert_array_equal(np.frombuffer(y, np.float32, N, Y_OFFSET), expect(x).astype(np.float32))

        # the capped x snapshot landed at the pointer's offset; the bytes before it are zero
        x_dev = harness.download(prepared, 0)
        assert x_dev[:X_OFFSET] == bytes(X_OFFSET)
        np.testing.assert_array_equal(np.frombuffer(x_dev, np.float32, N, X_OFFSET), x)

        batched = harness.time_batched(prepared, launches=20, rounds=3)
        assert len(batched) == 3 and all(0 < t < 1e9 for t in batched)

        result = harness.speedup(prepared, prepared, rounds=3, iterations=10)
        assert len(result.ref_round_medians_ns) == len(result.cand_round_medians_ns) == 3
        assert result.ref_median_ns > 0 and result.cand_median_ns > 0
        assert 0.2 < result.speedup < 5.0


@pytest.mark.gpu
@needs_nvcc
def test_gpu_every_launch_starts_from_the_module_variables_as_loaded(tmp_path: Path) -> None:
    """Without the restore, the launches after the first would read the tickets earlier ones took (a
    work-queue kernel would find its queue drained: examples/work_queue)."""
    src = tmp_path / "tickets.cu"
    src.write_text(TICKETS)
    cubin = compile_cubin(src, tmp_path / "t.cubin")
    base = 0x7F00_0040_0000
    launch = make_launch(
        tmp_path, (pointer(0, base, 0, 4),), {0: (base, struct.pack("<I", 12345))}, "take_ticket"
    )
    with EventHarness() as harness:
        kernel = harness.load(cubin, "take_ticket")
        assert [v.name for v in kernel.variables] == ["g_tickets"] and kernel.variables[0].nbytes == 4
        prepared = harness.prepare(kernel, launch, (1, 1, 1), (1, 1, 1), 0)
        assert harness.download(prepared, 0) == struct.pack("<I", 12345)
        assert len(harness.time(prepared, iterations=5, warmup=2)) == 5
        assert harness.download(prepared, 0) == struct.pack("<I", 0)
        assert len(harness.time_batched(prepared, launches=4, rounds=2)) == 2
        assert harness.download(prepared, 0) == struct.pack("<I", 0)

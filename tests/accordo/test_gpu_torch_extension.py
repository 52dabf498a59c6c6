"""Accordo on a PyTorch CUDA extension (torch.utils.cpp_extension): the tracer and the buffer capture see its
kernel launched through PyTorch's runtime and caching allocator, and a correct and a wrong variant of the
kernel get their verdicts without Accordo being told the signature."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from accordo.capture import run_capture
from accordo.validate import ValidationOptions, validate
from profiler.trace import run_traced

pytestmark = pytest.mark.gpu

KERNEL = """
__global__ void scale_add(const float* x, float* out, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + BIAS;
}
torch::Tensor run(torch::Tensor x, double a) {
    auto out = torch::zeros_like(x);
    int n = x.numel();
    scale_add<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), out.data_ptr<float>(), (float)a, n);
    return out;
}
"""

APP = """
import sys, torch
from torch.utils.cpp_extension import load_inline
ext = load_inline(name="scale_add_ext_{variant}", cpp_sources="torch::Tensor run(torch::Tensor x, double a);",
                  cuda_sources=open("kernel_{variant}.cu").read(), functions=["run"],
                  build_directory="build_{variant}", extra_cuda_cflags=["-lineinfo"])
x = torch.arange(5000, device="cuda", dtype=torch.float32)
for step in range(3):
    y = ext.run(x, 0.5 * (step + 1))
torch.cuda.synchronize()
print(float(y[-1]))
"""


def make_app(folder: Path, variant: str, bias: str) -> list[str]:
    (folder / f"build_{variant}").mkdir(parents=True, exist_ok=True)
    (folder / f"kernel_{variant}.cu").write_text(
        "#include <torch/extension.h>\n" + textwrap.dedent(KERNEL).replace("BIAS", bias)
    )
    (folder / f"app_{variant}.py").write_text(textwrap.dedent(APP).format(variant=variant))
    return [sys.executable, f"app_{variant}.py"]


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no GPU")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    folder = tmp_path_factory.mktemp("torch_ext")
    commands = {
        name: make_app(folder, name, bias)
        for name, bias in [("ref", "1.0f"), ("good", "1.0f"), ("bad", "1.5f")]
    }
    for command in commands.values():  # build once, outside the timed and captured runs
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
    return folder, commands


def test_the_extension_kernel_is_traced_and_its_buffers_captured(
    apps: tuple[Path, dict[str, list[str]]], native_lib: Path
) -> None:
    folder, commands = apps
    traced = run_traced(commands["ref"], cwd=folder, timeout_s=300, library=native_lib)
    stats = {s.demangled: s for s in traced.stats}
    assert stats["scale_add(float const*, float*, float, int)"].launches == 3
    run = run_capture(
        commands["ref"], kernel_regex="scale_add", cwd=folder, timeout_s=300, library=native_lib
    )
    assert run.status == "ok" and run.capture is not None and run.capture.complete
    assert len(run.capture.launches) == 3
    last = run.capture.launches[2]
    x, out, a, n = last.params[:4]
    assert [x.kind, out.kind] == ["pointer", "pointer"]
    assert a.scalar(np.float32) == 1.5 and n.scalar(np.int32) == 5000
    after = last.buffer(out.index, "after")  # the caching allocator may share one block between tensors
    assert after is not None and out.alloc_offset is not None
    values = after.view(np.float32, byte_offset=out.alloc_offset - (after.base - out.alloc_base), count=5000)
    np.testing.assert_allclose(values, 1.5 * np.arange(5000, dtype=np.float32) + 1.0)


def test_a_correct_rewrite_passes_and_a_wrong_one_fails(
    apps: tuple[Path, dict[str, list[str]]], native_lib: Path
) -> None:
    folder, commands = apps
    options = ValidationOptions(calibration_runs=2, runs=3, min_runs=2, timeout_s=300)
    good = validate(
        "scale_add", commands["ref"], commands["good"], cwd=folder, options=options, library=native_lib
    )
    assert good.passed, good.reason
    bad = validate(
        "scale_add", commands["ref"], commands["bad"], cwd=folder, options=options, library=native_lib
    )
    assert not bad.passed and bad.failure == "mismatch", bad.reason

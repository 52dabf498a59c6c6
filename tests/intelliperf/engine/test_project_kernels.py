"""A project without CUDA or C++ source owns only the kernels its Python files name (PyTorch's flash
attention, Inductor's kernels and other libraries' kernels that no name prefix catches are listed, not
profiled); a project with native source is left to the name prefixes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from intelliperf.engine import project_kernels
from intelliperf.engine.project_kernels import compiled_elsewhere, has_native_source
from intelliperf.errors import KernelNotFoundError
from tests.recorded import EXAMPLES, replay_in
from tests.support.reports import make_kernel

FLASH = (
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, "
    "cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, "
    "false, true, true, false, false>(pytorch_flash::Flash_fwd_params)"
)
TRITON_SOURCE = "import triton\n\n@triton.jit\ndef silu_loop(x_ptr, n):\n    pass\n"


def kernels() -> list:
    return [
        make_kernel(1, "_ZN13pytorch_flash16flash_fwd_kernelE", demangled=FLASH),
        make_kernel(2, "silu_loop", demangled="silu_loop"),
        make_kernel(3, "triton_poi_fused_add_0", demangled="triton_poi_fused_add_0"),
        make_kernel(4, "add_kernel_0d1d2de", demangled="add_kernel_0d1d2de"),
        make_kernel(5, "sm90_xmma_gemm", demangled="sm90_xmma_gemm_bf16bf16", library=True),
    ]


def library_names(marked: list) -> list[str]:
    return [k.name for k in marked if k.library]


def test_a_python_project_owns_the_kernels_its_files_name_and_no_others(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(TRITON_SOURCE + "def add_kernel(x):\n    pass\n")
    marked = compiled_elsewhere(kernels(), tmp_path)
    assert library_names(marked) == [
        "_ZN13pytorch_flash16flash_fwd_kernelE",
        "triton_poi_fused_add_0",
        "sm90_xmma_gemm",
    ]
    assert [k.rank for k in marked] == [1, 2, 3, 4, 5]  # nothing else changes


def test_a_cuda_source_in_a_python_string_makes_its_kernel_the_projects(tmp_path: Path) -> None:
    (tmp_path / "ext.py").write_text('SOURCE = """__global__ void flash_fwd_kernel(float* x) {}"""\n')
    assert "_ZN13pytorch_flash16flash_fwd_kernelE" not in library_names(
        compiled_elsewhere(kernels(), tmp_path)
    )


@pytest.mark.parametrize(
    "source", ["kernels/scale.cu", "include/tile.cuh", "src/ops.cpp", "csrc/ops.h", "src/lds.hip"]
)
def test_a_project_with_native_source_is_left_to_the_name_prefixes(tmp_path: Path, source: str) -> None:
    (tmp_path / "setup.py").write_text("from setuptools import setup\n")
    (tmp_path / source).parent.mkdir(parents=True)
    (tmp_path / source).write_text("// a kernel made by a macro is not found by its name\n")
    assert has_native_source(tmp_path)
    assert library_names(compiled_elsewhere(kernels(), tmp_path)) == ["sm90_xmma_gemm"]


def test_a_project_of_binaries_and_build_files_is_left_to_the_name_prefixes(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("bin/app:\n\ttrue\n")
    assert library_names(compiled_elsewhere(kernels(), tmp_path)) == ["sm90_xmma_gemm"]


@pytest.mark.parametrize("folder", [".venv/include/torch", "env/lib/python3.12/site-packages/torch/include"])
def test_installed_packages_headers_are_not_the_projects_source(tmp_path: Path, folder: str) -> None:
    (tmp_path / folder).mkdir(parents=True)
    (tmp_path / folder / "ATen.h").write_text("#pragma once\n")
    (tmp_path / "train.py").write_text("import torch\n")
    assert not has_native_source(tmp_path)
    assert "_ZN13pytorch_flash16flash_fwd_kernelE" in library_names(compiled_elsewhere(kernels(), tmp_path))


def test_past_the_python_limit_no_kernel_is_taken_from_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "model.py").write_text(TRITON_SOURCE)
    monkeypatch.setattr(project_kernels, "PYTHON_BYTES_LIMIT", len(TRITON_SOURCE))
    assert library_names(compiled_elsewhere(kernels(), tmp_path)) == [
        "_ZN13pytorch_flash16flash_fwd_kernelE",
        "triton_poi_fused_add_0",
        "add_kernel_0d1d2de",
        "sm90_xmma_gemm",
    ]
    monkeypatch.setattr(project_kernels, "PYTHON_BYTES_LIMIT", len(TRITON_SOURCE) - 1)
    assert library_names(compiled_elsewhere(kernels(), tmp_path)) == ["sm90_xmma_gemm"]


def test_a_pytorch_program_whose_python_names_none_of_its_kernels_owns_none(tmp_path: Path) -> None:
    """torch_model's recorded run (a GPU machine's trace and counters): its Triton kernel is the project's
    while model.py defines it; renamed away, every kernel is a library's and the diagnosis says so."""
    project = tmp_path / "torch_model"
    shutil.copytree(EXAMPLES / "torch_model", project)
    report = replay_in("torch_model", project)
    assert report.selected is not None and report.selected.kernel == "write_transposed"
    for script in project.glob("*.py"):
        script.write_text(script.read_text().replace("write_transposed", "write_flipped"))
    with pytest.raises(
        KernelNotFoundError, match=r"every kernel the application launched comes from a library"
    ):
        replay_in("torch_model", project)

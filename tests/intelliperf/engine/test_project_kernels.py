"""A project without CUDA or C++ source owns only the kernels its Python files name (PyTorch's flash
attention, Inductor's kernels and other libraries' kernels that no name prefix catches are listed, not
profiled); a project with native source is left to the name prefixes, but for the kernels it defines,
which are its own whatever their names begin with (HeCBench's gemv_quantized_int4 against cuBLAS's gemv
prefix)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from intelliperf.engine import project_kernels
from intelliperf.engine.project_kernels import compiled_elsewhere, defined_kernels, has_native_source
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
    monkeypatch.setattr(project_kernels, "SOURCE_BYTES_LIMIT", len(TRITON_SOURCE))
    assert library_names(compiled_elsewhere(kernels(), tmp_path)) == [
        "_ZN13pytorch_flash16flash_fwd_kernelE",
        "triton_poi_fused_add_0",
        "add_kernel_0d1d2de",
        "sm90_xmma_gemm",
    ]
    monkeypatch.setattr(project_kernels, "SOURCE_BYTES_LIMIT", len(TRITON_SOURCE) - 1)
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


GEMV_INT4 = "gemv_quantized_int4(uint4_2*, __half*, __half*, unsigned int, __half, __half, unsigned int)"
"""As the GPU machine's trace named HeCBench gemv's kernel (benchmarks/thirdparty, 2026-11-29)."""
CUBLAS_GEMV = (
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>(float)"
)
GEMV_KERNELS_H = """
// as HeCBench's src/gemv-cuda/kernels.h declares its kernels
__global__ void gemv_quantized_int4(uint4_2* mat, __half* vec, __half* res,
                                    unsigned int n, __half scale, __half zero_point,
                                    unsigned int num_per_thread) {
  float sum = 0;
}
"""


def gemv_kernels() -> list:
    return [
        make_kernel(1, "_Z19gemv_quantized_int4", demangled=GEMV_INT4, library=True),
        make_kernel(2, "_Z17gemv2T_kernel_val", demangled=CUBLAS_GEMV, library=True),
    ]


def test_a_kernel_the_project_defines_is_its_own_though_its_name_begins_like_a_librarys(
    tmp_path: Path,
) -> None:
    (tmp_path / "kernels.h").write_text(GEMV_KERNELS_H)
    (tmp_path / "main.cu").write_text("// calls cublasSgemv, whose gemv2T_kernel_val is cuBLAS's\n")
    assert library_names(compiled_elsewhere(gemv_kernels(), tmp_path)) == ["_Z17gemv2T_kernel_val"]
    (tmp_path / "kernels.h").unlink()
    assert library_names(compiled_elsewhere(gemv_kernels(), tmp_path)) == [
        "_Z19gemv_quantized_int4",
        "_Z17gemv2T_kernel_val",
    ]


def test_a_kernel_named_but_not_defined_by_the_project_stays_a_librarys(tmp_path: Path) -> None:
    (tmp_path / "main.cu").write_text(
        "// gemv2T_kernel_val is slower than ours\nvoid gemv2T_kernel_val(float x);  // not a kernel\n"
    )
    assert library_names(compiled_elsewhere(gemv_kernels(), tmp_path)) == [
        "_Z19gemv_quantized_int4",
        "_Z17gemv2T_kernel_val",
    ]


@pytest.mark.parametrize(
    ("source", "defined"),
    [
        ("__global__ void __launch_bounds__(256) gemv_x(float* a) {}", {"gemv_x"}),
        ("template <int TILE>\n__global__ void\ntile_sums(const float* in, float* out);", {"tile_sums"}),
        ('extern "C" __global__ void scale(float* x, int n)\n{\n}', {"scale"}),
        ("__global__ __attribute__((used)) void kern(int* p) { f(p); }", {"kern"}),
        ('SOURCE = """__global__ void from_python(float* x) {}"""', {"from_python"}),
        ("#define KERNEL __global__\nint helper(int x);", {"helper"}),  # a macro: the next declaration
        ("// no kernel here\nint main(int argc, char** argv) { return 0; }", set()),
    ],
)
def test_defined_kernels_reads_the_name_of_each_global_declaration(
    tmp_path: Path, source: str, defined: set[str]
) -> None:
    (tmp_path / ("ext.py" if source.startswith("SOURCE") else "k.cu")).write_text(source)
    assert defined_kernels(tmp_path) == defined


def test_past_the_source_limit_the_rest_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "kernels.h").write_text(GEMV_KERNELS_H)
    monkeypatch.setattr(project_kernels, "SOURCE_BYTES_LIMIT", len(GEMV_KERNELS_H))
    assert defined_kernels(tmp_path) == {"gemv_quantized_int4"}
    monkeypatch.setattr(project_kernels, "SOURCE_BYTES_LIMIT", len(GEMV_KERNELS_H) - 1)
    assert defined_kernels(tmp_path) == set()


def test_a_python_project_is_read_once_for_definitions_and_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python project whose string defines a kernel a prefix takes for a library's: one reading of its
    files settles both (the definitions and the names its Python holds)."""
    (tmp_path / "model.py").write_text(TRITON_SOURCE)
    (tmp_path / "ext.py").write_text('SOURCE = """__global__ void gemv_mine(float* x) {}"""\n')
    reads: list[str] = []
    read_text = Path.read_text

    def counted(path: Path, *args: object, **kwargs: object) -> str:
        reads.append(path.name)
        return read_text(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", counted)
    marked = compiled_elsewhere([*kernels(), make_kernel(6, "gemv_mine", library=True)], tmp_path)
    assert sorted(reads) == ["ext.py", "model.py"]
    assert library_names(marked) == [
        "_ZN13pytorch_flash16flash_fwd_kernelE",
        "triton_poi_fused_add_0",
        "add_kernel_0d1d2de",
        "sm90_xmma_gemm",
    ]

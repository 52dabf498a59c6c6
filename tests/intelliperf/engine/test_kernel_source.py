"""A kernel's definition in the project, for backends whose counters are per kernel."""

from __future__ import annotations

from pathlib import Path

from intelliperf.engine.kernel_source import at_kernel_definition, find_kernel
from tests.recorded import EXAMPLES
from tests.support.reports import make_diagnosis


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def test_templated_namespaced_and_triton_kernels_are_found_by_their_function_name() -> None:
    tile_sums = EXAMPLES / "tile_sums"
    assert find_kernel(tile_sums, "void geom::tile_sums<32>(float2 const*, float*, int)") == (
        "tile_sums.cu",
        line_of(tile_sums / "tile_sums.cu", "__global__ void tile_sums("),
    )
    strided = EXAMPLES / "triton_strided"
    file, line = find_kernel(strided, "scale_elements") or ("", 0)
    assert file in {"scale_strided.py", "scale_strided_fixed.py"}
    assert line == line_of(strided / file, "def scale_elements(")


def test_a_launch_or_a_missing_kernel_is_not_a_definition(tmp_path: Path) -> None:
    (tmp_path / "main.hip").write_text(
        "int main() {\n  hipLaunchKernelGGL(saxpy, 1, 1, 0, 0);\n  saxpy<<<1, 1>>>(x);\n}\n"
    )
    assert find_kernel(tmp_path, "saxpy(int, float, float const*, float*)") is None
    (tmp_path / "kernels.hip").write_text("\n__global__ void\n__launch_bounds__(256)\nsaxpy(int n) {}\n")
    assert find_kernel(tmp_path, "saxpy(int, float, float const*, float*)") == ("kernels.hip", 4)


def test_only_a_present_diagnosis_without_lines_gets_the_definition(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) {\n  x[0] = 1;\n}\n")
    present = make_diagnosis("_Z1kPf", severity="low", saving_fraction=0.1)
    [located] = at_kernel_definition([present], tmp_path, "k(float*)")
    [location] = located.locations
    assert (location.file, location.line) == ("k.cu", 1) and location.code[0].hot
    absent = present.model_copy(update={"present": False})
    assert at_kernel_definition([absent], tmp_path, "k(float*)")[0].locations == []

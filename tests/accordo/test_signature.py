from __future__ import annotations

import re

import pytest

from accordo.signature import element_type, kernel_pattern, parse_parameters


def test_parameters_of_a_demangled_name() -> None:
    params = parse_parameters("block_sum(float const*, float*, int)")
    assert params is not None
    assert [(p.pointer, p.const, p.element) for p in params] == [
        (True, True, "float"),
        (True, False, "float"),
        (False, False, "int"),
    ]
    assert [element_type(p) for p in params] == ["float32", "float32", None]


@pytest.mark.parametrize(
    ("demangled", "expected"),
    [
        ("reduction_atomic(float const*, float*, unsigned long)", ["float32", "float32", None]),
        (
            "void k<float, 4>(double*, __half const*, __nv_bfloat16*, unsigned char*)",
            ["float64", "float16", "bfloat16", "uint8"],
        ),
        (
            "ns::k(int const* __restrict__, long long*, Particle*, void*, float**)",
            ["int32", "int64", None, None, None],
        ),
        ("k(std::pair<int, float>*, unsigned int*)", [None, "uint32"]),
    ],
)
def test_element_types(demangled: str, expected: list[str | None]) -> None:
    params = parse_parameters(demangled)
    assert params is not None
    assert [element_type(p) for p in params] == expected


def test_names_without_a_signature() -> None:
    assert parse_parameters("add_kernel") is None  # Triton, extern "C"
    assert parse_parameters("k()") == []
    assert element_type(None, "float16") == "float16"


@pytest.mark.parametrize(
    ("kernel", "matches", "misses"),
    [
        ("block_sum", ["block_sum(float const*, float*, int)", "ns::block_sum<float>(float*)", "block_sum",
                       "void block_sum<float>(float*)"], ["block_sum_v2(float*)", "my_block_sum(float*)"]),
        ("_Z9block_sumPKfPfi", ["_Z9block_sumPKfPfi"], ["_Z9block_sumPKfPfiX"]),
        ("block_.*_v[0-9]", ["block_sum_v2(float*)"], ["block_sum(float*)"]),
    ],
)  # fmt: skip
def test_kernel_pattern(kernel: str, matches: list[str], misses: list[str]) -> None:
    pattern = re.compile(kernel_pattern(kernel))
    assert all(pattern.search(name) for name in matches)
    assert not any(pattern.search(name) for name in misses)


def test_bad_patterns() -> None:
    with pytest.raises(ValueError, match="empty"):
        kernel_pattern("  ")
    with pytest.raises(ValueError, match="not a valid regex"):
        kernel_pattern("block_(sum")

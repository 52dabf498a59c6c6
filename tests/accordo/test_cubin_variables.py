"""accordo.cubin_variables on a cubin nvcc built (tests/fixtures/cubins/variables.cu): the module variables a
kernel can write, found in the ELF symbol table, and clear errors for images that are not ELF64 cubins."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from accordo.cubin_variables import CubinError, device_variables

CUBIN = Path(__file__).resolve().parents[1] / "fixtures" / "cubins" / "variables_sm90.cubin"


def test_the_writable_variables_are_found_and_the_constant_one_is_not() -> None:
    assert device_variables(CUBIN.read_bytes()) == ["queue_next", "running_total", "launches_seen"]


def test_an_image_that_is_not_elf_is_refused() -> None:
    with pytest.raises(CubinError, match="not an ELF image"):
        device_variables(b"// PTX text\n.version 8.0\n" + bytes(64))


def test_a_32_bit_elf_is_refused() -> None:
    image = bytearray(CUBIN.read_bytes())
    image[4] = 1  # ELFCLASS32
    with pytest.raises(CubinError, match="64-bit little-endian"):
        device_variables(bytes(image))


def test_a_truncated_cubin_names_the_table_that_lies_outside_it() -> None:
    image = CUBIN.read_bytes()
    (shoff,) = struct.unpack_from("<Q", image, 0x28)
    with pytest.raises(CubinError, match=r"section header table .* outside the"):
        device_variables(image[:shoff])
    with pytest.raises(CubinError, match="outside"):
        device_variables(image[:64] + bytes(len(image) - 64))  # tables' offsets kept, their bytes gone

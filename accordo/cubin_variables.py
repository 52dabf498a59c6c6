"""The writable ``__device__`` variables of a cubin, read from its ELF symbol table.

A kernel that keeps state in a module variable (a work-queue counter, a flag, a running total) reads what
the previous launch left there. The capture holds the bytes its pointer parameters reach, not the module's
own variables, so a replay puts every such variable back to what the module held when it was loaded
before each launch (accordo.replay): without that, the second of two timed launches of a work-queue
kernel finds the queue already drained and does nothing.

Writable module variables live in the sections ``.nv.global`` (zero-initialised) and ``.nv.global.init``
(initialised); ``__constant__`` variables (``.nv.constant<n>``) cannot be written by a kernel. A whole
program compilation gives them local binding; ``cuModuleGetGlobal`` finds them by name all the same.
"""

from __future__ import annotations

import struct

__all__ = ["CubinError", "device_variables"]

ELF_MAGIC = b"\x7fELF"
ELFCLASS64 = 2
ELFDATA2LSB = 1
SHT_SYMTAB = 2
STT_OBJECT = 1
SHN_UNDEF = 0
SHN_LORESERVE = 0xFF00
WRITABLE_SECTIONS = (".nv.global", ".nv.global.init")

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")


class CubinError(ValueError):
    """The image is not a 64-bit little-endian ELF cubin, or its tables point outside it."""


def _string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise CubinError(f"a name at offset {offset} lies outside its string table")
    return table[offset:end].decode("utf-8", "replace")


def _slice(image: bytes, offset: int, size: int, what: str) -> bytes:
    if offset < 0 or size < 0 or offset + size > len(image):
        raise CubinError(f"{what} ({size} bytes at {offset}) lies outside the {len(image)}-byte image")
    return image[offset : offset + size]


def device_variables(image: bytes) -> list[str]:
    """The names of the module variables a kernel of ``image`` can write, in symbol table order."""
    if len(image) < _HEADER.size or image[:4] != ELF_MAGIC:
        raise CubinError("not an ELF image")
    ident, *_rest = header = _HEADER.unpack_from(image)
    if ident[4] != ELFCLASS64 or ident[5] != ELFDATA2LSB:
        raise CubinError("not a 64-bit little-endian ELF image")
    shoff, shentsize, shnum, shstrndx = header[6], header[11], header[12], header[13]
    if shnum == 0:
        return []
    if shentsize != _SECTION.size or shstrndx >= shnum:
        raise CubinError(f"section headers of {shentsize} bytes (or their names' index) are not ELF64's")
    table = _slice(image, shoff, shnum * shentsize, "the section header table")
    sections = [_SECTION.unpack_from(table, i * shentsize) for i in range(shnum)]
    names_header = sections[shstrndx]
    section_names = _slice(image, names_header[4], names_header[5], "the section names")
    writable = {i for i, s in enumerate(sections) if _string(section_names, s[0]) in WRITABLE_SECTIONS}
    variables: list[str] = []
    for symtab in (s for s in sections if s[1] == SHT_SYMTAB):
        _name, _type, _flags, _addr, offset, size, link, _info, _align, entsize = symtab
        if entsize != _SYMBOL.size or link >= len(sections):
            raise CubinError(f"a symbol table of {entsize}-byte entries (or its names' index) is not ELF64's")
        symbols = _slice(image, offset, size, "the symbol table")
        strtab = sections[link]
        names = _slice(image, strtab[4], strtab[5], "the symbol names")
        for at in range(0, len(symbols) - entsize + 1, entsize):
            name, info, _other, shndx, _value, _size = _SYMBOL.unpack_from(symbols, at)
            if info & 0xF != STT_OBJECT or shndx == SHN_UNDEF or shndx >= SHN_LORESERVE:
                continue
            if shndx in writable:
                variables.append(_string(names, name))
    return variables

"""Parameter types from a kernel's demangled name, and the element type each pointer parameter implies.

``block_sum(float const*, float*, int)`` gives three parameters; the first two point to float32
elements, the first is const (the kernel promises to only read it). Names without a parameter list
(Triton kernels, ``extern "C"`` kernels) give no types: the caller falls back to a default element type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ELEMENT_TYPES", "ParamType", "element_type", "kernel_pattern", "parse_parameters"]

# The element types Accordo compares numerically; everything else is compared byte for byte.
_SCALAR_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "bool": "uint8",
    "char": "int8",
    "signed char": "int8",
    "unsigned char": "uint8",
    "short": "int16",
    "unsigned short": "uint16",
    "int": "int32",
    "unsigned int": "uint32",
    "long": "int64",
    "unsigned long": "uint64",
    "long long": "int64",
    "unsigned long long": "uint64",
    "int8_t": "int8",
    "uint8_t": "uint8",
    "int16_t": "int16",
    "uint16_t": "uint16",
    "int32_t": "int32",
    "uint32_t": "uint32",
    "int64_t": "int64",
    "uint64_t": "uint64",
}
ELEMENT_TYPES = frozenset(_SCALAR_TYPES.values())
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict)\b")


@dataclass(frozen=True)
class ParamType:
    text: str  # as demangled, e.g. "float const*"
    pointer: bool
    const: bool  # the pointed-to elements are const
    element: str  # the pointee (or the scalar type) without qualifiers, e.g. "float"


def _split_top_level(params: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for ch in params:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    tail = "".join(current).strip()
    if tail:
        parts.append(tail)
    return parts


def _parameter_list(demangled: str) -> str | None:
    """The text between the parentheses that close the name, or None if there are none."""
    text = demangled.strip()
    if not text.endswith(")"):
        return None
    depth = 0
    for pos in range(len(text) - 1, -1, -1):
        if text[pos] == ")":
            depth += 1
        elif text[pos] == "(":
            depth -= 1
            if depth == 0:
                return text[pos + 1 : -1]
    return None


def parse_parameters(demangled: str) -> list[ParamType] | None:
    """The parameter types of a demangled kernel name; None when the name carries no parameter list."""
    inner = _parameter_list(demangled)
    if inner is None:
        return None
    if inner.strip() in ("", "void"):
        return []
    types = []
    for text in _split_top_level(inner):
        bare = re.sub(r"(\s*\b(const|volatile|__restrict__|__restrict|restrict)\b)+\s*$", "", text).rstrip()
        pointer = bare.endswith("*")
        if pointer:
            pointee = bare[:-1]
            const = re.search(r"\bconst\b", pointee) is not None
        else:
            pointee = text
            const = False
        element = " ".join(_QUALIFIERS.sub(" ", pointee).split())
        types.append(ParamType(text=text, pointer=pointer, const=const, element=element))
    return types


def element_type(param: ParamType | None, default: str = "float32") -> str | None:
    """The element type to compare a buffer as (a name of ``ELEMENT_TYPES``), or None for bytes.

    ``default`` applies when the type is unknown (no signature); a pointer to a struct, to a pointer
    or to ``void`` is compared byte for byte.
    """
    if param is None:
        return default
    if not param.pointer:
        return None
    element = param.element
    if element.endswith("*") or element in ("void", ""):
        return None
    return _SCALAR_TYPES.get(element.removeprefix("std::"))


def kernel_pattern(kernel: str) -> str:
    """The ECMAScript/Python regex the native profiler searches for ``kernel``.

    A mangled name (``_Z...``) matches exactly; a plain identifier matches a kernel of that name in any
    namespace, template or not (``block_sum``, ``ns::block_sum<float>(...)``, Triton's ``block_sum``)
    but not ``block_sum_v2``; anything else is taken as a regex as given.
    """
    kernel = kernel.strip()
    if not kernel:
        raise ValueError("the kernel name is empty")
    if re.fullmatch(r"_Z\w+", kernel):
        return f"^{kernel}$"
    if re.fullmatch(r"[A-Za-z_]\w*", kernel):
        return rf"(^|::|\s){kernel}(\(|<|$)"
    try:
        re.compile(kernel)
    except re.error as exc:
        raise ValueError(f"the kernel pattern {kernel!r} is not a valid regex: {exc}") from None
    return kernel

"""A cubin's machine code with its source lines, from the CUDA toolkit's disassembler.

``nvdisasm --print-line-info-inline --print-code`` prints, per function (its ELF section
``.text.<mangled name>``), each instruction as ``/*<offset>*/ <SASS> ;`` and, before the instructions of a
source line, a comment naming it::

    //## File "/src/app.cu", line 53
    //## File "/cuda/include/sm_20_atomic_functions.hpp", line 84 inlined at "/src/app.cu", line 53

An instruction belongs to the comments before it (since the previous instruction; the last line named
holds until another is). Inlined code is named twice: first with the inlined function's line and each call
site outward, then with the outermost call site alone. The instruction is attributed to the innermost line
of that chain that is not in the CUDA toolkit's headers (a toolkit function such as ``atomicAdd`` counts at
the user's call, a user's own ``__device__`` function at its own line), as Nsight Compute's source view
attributes it. A kernel built without ``-lineinfo`` has no such comments: its instructions have no line.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from formulas.base import is_toolkit_file
from intelliperf.errors import ProfileError, tail

__all__ = ["ListedInstruction", "disassemble", "parse_listing"]

DISASM_TIMEOUT_S = 120

_SECTION = re.compile(r"^//-+\s+(\S+)\s+-+$")
_CODE_SECTION = ".text."
_MARKER = re.compile(r'^\s*//## File "([^"]*)", line (\d+)(.*)$')
_INLINED_AT = re.compile(r'inlined at "([^"]*)", line (\d+)')
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;?\s*$")


@dataclass(frozen=True)
class ListedInstruction:
    offset: int
    """Bytes from the start of the function: the pc offset CUPTI reports its counts at."""
    sass: str
    file: str | None
    line: int | None


def disassemble(nvdisasm: str, cubin: Path) -> str:
    """The listing of every function in ``cubin`` (see the module doc)."""
    try:
        done = subprocess.run(
            [nvdisasm, "--print-line-info-inline", "--print-code", str(cubin)],
            capture_output=True,
            text=True,
            timeout=DISASM_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProfileError(f"disassembling {cubin.name} with {nvdisasm} failed: {exc}") from exc
    if done.returncode != 0:
        raise ProfileError(
            f"disassembling {cubin.name} with {nvdisasm} failed (exit status {done.returncode})",
            log_tail=tail(done.stderr) or None,
        )
    return done.stdout


def _chain(marker: re.Match[str]) -> list[tuple[str, int]]:
    """A comment's locations, innermost first: the line, then each call site it was inlined at. Paths are
    normalized (nvcc names the toolkit's headers as ``/usr/local/cuda/bin/../targets/...``)."""
    places = [(marker.group(1), marker.group(2)), *_INLINED_AT.findall(marker.group(3))]
    return [(os.path.normpath(file), int(line)) for file, line in places]


def _attributed(markers: list[re.Match[str]]) -> tuple[str, int]:
    """The line the instructions under these comments (consecutive, no instruction between them) count at.
    nvdisasm names inlined code twice, its inline chain and then the outermost call site alone; the chain
    is the more specific, and in it the innermost line outside the toolkit counts."""
    chain = max((_chain(marker) for marker in markers), key=len)
    return next((place for place in chain if not is_toolkit_file(place[0])), chain[0])


def parse_listing(text: str) -> dict[str, list[ListedInstruction]]:
    """Function (mangled name) -> its instructions in address order, each with its source line."""
    functions: dict[str, list[ListedInstruction]] = {}
    current: list[ListedInstruction] | None = None
    place: tuple[str, int] | None = None
    pending: list[re.Match[str]] = []
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section is not None:  # a function's code, or another section (SYMBOLS) that ends the last one
            name = section.group(1)
            code = name.startswith(_CODE_SECTION)
            current = functions.setdefault(name.removeprefix(_CODE_SECTION), []) if code else None
            place, pending = None, []
            continue
        if current is None:
            continue
        marker = _MARKER.match(line)
        if marker is not None:
            pending.append(marker)
            continue
        instruction = _INSTRUCTION.match(line)
        if instruction is not None:
            if pending:
                place, pending = _attributed(pending), []
            file, number = place if place is not None else (None, None)
            offset = int(instruction.group(1), 16)
            current.append(ListedInstruction(offset, instruction.group(2), file, number))
    return functions

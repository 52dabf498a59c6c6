"""The disassembly listing the CUPTI counter pass reads lines from, checked against Nsight Compute's source
page of the same binaries (tests/fixtures/gpu/sass_listing: both recorded in one device call)."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest

from benchmarks.ncu.source import parse_cuda_sass_view
from intelliperf.errors import ProfileError
from intelliperf.gpu.nvidia.sass_listing import disassemble, parse_listing
from tests.recorded import RECORDED

LISTINGS = RECORDED / "sass_listing"
CASES = sorted(p.name for p in LISTINGS.iterdir() if p.is_dir())
LISTED_ROOT = "/work/main/examples"
"""Where the examples were when the listings were recorded."""


def listing(case: str) -> dict:
    return parse_listing((LISTINGS / case / "listing.txt").read_text())


def ncu_lines(case: str) -> dict[str, dict[int, set[tuple[str, int]]]]:
    """Function -> instruction offset -> the (file name, line) pairs ncu's page lists it under."""
    view = parse_cuda_sass_view((LISTINGS / case / "source_cuda_sass.csv").read_text())
    found: dict[str, dict[int, set[tuple[str, int]]]] = {}
    for function, lines in view.items():
        addresses = [int(a, 16) for line in lines for a in line.addresses]
        if not addresses:
            continue
        start = min(addresses)  # the function's first instruction: its offset 0
        for line in lines:
            for address in line.addresses:
                owners = found.setdefault(function, {}).setdefault(int(address, 16) - start, set())
                owners.add((Path(line.file).name, line.line))
    return found


@pytest.mark.parametrize("case", CASES)
def test_every_instruction_counts_at_a_line_nsight_compute_lists_it_under(case: str) -> None:
    """Where ncu lists an instruction under a line of the project, ours is one of those lines. Where it
    lists it only under a toolkit header's line (the rest of an inlined atomicAdd; the counter pass then gave
    it to the call site), ours is the project's line that the header's code was inlined at."""
    ours = listing(case)
    theirs = ncu_lines(case)
    text = (LISTINGS / case / "listing.txt").read_text()
    assert theirs, case
    for function, by_offset in theirs.items():
        mine = {i.offset: (Path(i.file).name if i.file else None, i.line) for i in ours[function]}
        wrong = {}
        for offset, lines in by_offset.items():
            if any(not name.endswith(".hpp") for name, _ in lines):
                if mine.get(offset) not in lines:
                    wrong[hex(offset)] = (lines, mine.get(offset))
            elif (
                f'inlined at "{LISTED_ROOT}/{case.split("-")[0]}/{mine[offset][0]}", line {mine[offset][1]}'
                not in text
            ):
                wrong[hex(offset)] = (lines, mine.get(offset))
        assert wrong == {}, (function, list(wrong.items())[:5])


@pytest.mark.parametrize("case", CASES)
def test_functions_hold_their_own_instructions_and_nothing_else(case: str) -> None:
    """Each function's instructions start at offset 0 and go up by 16 bytes (sm_90), and no section after the
    code (SYMBOLS) adds any: every function lists exactly as many instructions as ncu's page has."""
    ours = listing(case)
    theirs = ncu_lines(case)
    for function, by_offset in theirs.items():
        offsets = [i.offset for i in ours[function]]
        assert offsets == list(range(0, 16 * len(offsets), 16)), function
        assert len(offsets) == len(by_offset), function


def test_an_inlined_toolkit_atomic_counts_at_the_users_call() -> None:
    """atomicAdd's body is in sm_20_atomic_functions.hpp; its REDG counts at line 53 of the kernel's file."""
    red = next(
        i for i in listing("atomic_reduction-original")["_Z10atomic_sumPKfPfi"] if i.sass.startswith("RED")
    )
    assert (Path(red.file or "").name, red.line) == ("atomic_reduction.cu", 53)
    text = (LISTINGS / "atomic_reduction-original" / "listing.txt").read_text()
    assert re.search(
        r'sm_20_atomic_functions\.hpp", line \d+ inlined at "[^"]*atomic_reduction\.cu", line 53', text
    )


def test_an_inlined_user_function_counts_at_its_own_lines() -> None:
    """init_values calls hash_u32 (lines 22-26 of the file), inlined: its instructions count there, not at
    the call on line 48."""
    lines = {i.line for i in listing("atomic_reduction-fixed")["_Z11init_valuesPfij"]}
    assert {23, 24, 25} <= lines and 48 in lines


def test_a_kernel_built_without_line_info_has_instructions_but_no_lines() -> None:
    """The same listing without nvdisasm's line comments, as it prints a cubin built without -lineinfo."""
    text = (LISTINGS / "tile_sums-original" / "listing.txt").read_text()
    stripped = "\n".join(line for line in text.splitlines() if "//## File" not in line)
    functions = parse_listing(stripped)
    assert len(functions) == len(parse_listing(text))
    assert all(i.file is None and i.line is None for f in functions.values() for i in f)
    assert all(functions.values())


def test_disassembling_fails_with_the_tools_words(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="failed"):
        disassemble(str(tmp_path / "no-nvdisasm"), tmp_path / "x.cubin")
    failing = tmp_path / "nvdisasm"
    failing.write_text("#!/bin/sh\necho 'nvdisasm fatal : Input file is not a valid ELF' >&2\nexit 1\n")
    failing.chmod(failing.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(ProfileError, match="exit status 1") as caught:
        disassemble(str(failing), tmp_path / "x.cubin")
    assert "not a valid ELF" in (caught.value.log_tail or "")

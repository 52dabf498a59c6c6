"""The edit format the LLM answers in, its parser, and applying it to a project copy.

A reply holds one or more blocks, each naming a file on the line before it (a Markdown code fence
around the blocks, and prose around them, are tolerated)::

    src/transpose.cu
    <<<<<<< SEARCH
    __shared__ float tile[32][32];
    =======
    __shared__ float tile[32][33];
    >>>>>>> REPLACE

or, to replace a whole file::

    src/transpose.cu
    <<<<<<< FILE
    ...the complete new content...
    >>>>>>> FILE

The search text must occur exactly once in the file (compared line by line, ignoring trailing
whitespace). Everything is checked before anything is written, so an edit applies completely or not at
all; every problem is an EditError whose message goes back to the model.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Edit", "EditError", "apply_edits", "edit_blocks", "parse_edits", "unified_diff"]

_SEARCH, _DIVIDER, _REPLACE = "<<<<<<< SEARCH", "=======", ">>>>>>> REPLACE"
_FILE_START, _FILE_END = "<<<<<<< FILE", ">>>>>>> FILE"
_FENCE = re.compile(r"^\s*```")


class EditError(ValueError):
    """The reply cannot be applied; the message says why, in words meant for the model."""


@dataclass(frozen=True)
class Edit:
    path: str  # relative to the project
    search: str | None  # None: ``replace`` is the whole new file
    replace: str


def _path_before(lines: list[str], index: int) -> str:
    """The file name on the nearest non-blank line above a block, skipping code fences; decorations such as
    backticks, bold markers, '#', '//' or 'File:' around it are dropped."""
    for back in range(index - 1, max(-1, index - 5), -1):
        line = lines[back].strip()
        if not line or _FENCE.match(line):
            continue
        candidate = re.sub(r"^((#+|//|file:|path:)\s*)+", "", line.strip("`*"), flags=re.IGNORECASE).strip(
            "`* :"
        )
        if candidate and " " not in candidate:
            return candidate
        break
    raise EditError(
        f"the block starting on line {index + 1} of your reply does not name its file on the line before it"
    )


def parse_edits(reply: str) -> list[Edit]:
    """The edits of a reply. Raises EditError when it holds none or a block is malformed."""
    lines = reply.replace("\r\n", "\n").split("\n")
    edits: list[Edit] = []
    i = 0
    while i < len(lines):
        marker = lines[i].strip()
        if marker == _SEARCH:
            path = _path_before(lines, i)
            try:
                divider = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == _DIVIDER)
                end = next(k for k in range(divider + 1, len(lines)) if lines[k].strip() == _REPLACE)
            except StopIteration:
                raise EditError(
                    f"the SEARCH block for {path} (line {i + 1}) is not closed by '{_DIVIDER}' and then "
                    f"'{_REPLACE}'"
                ) from None
            search = "\n".join(lines[i + 1 : divider])
            if not search.strip():
                raise EditError(
                    f"the SEARCH block for {path} (line {i + 1}) is empty; quote the lines to replace"
                )
            edits.append(Edit(path, search, "\n".join(lines[divider + 1 : end])))
            i = end + 1
        elif marker == _FILE_START:
            path = _path_before(lines, i)
            end = next((k for k in range(i + 1, len(lines)) if lines[k].strip() == _FILE_END), None)
            if end is None:
                raise EditError(f"the FILE block for {path} (line {i + 1}) is not closed by '{_FILE_END}'")
            edits.append(Edit(path, None, "\n".join(lines[i + 1 : end]) + "\n"))
            i = end + 1
        else:
            i += 1
    if not edits:
        raise EditError(
            "your reply holds no edit: answer with SEARCH/REPLACE blocks (the file's path on the line before "
            f"'{_SEARCH}', the exact lines to find, '{_DIVIDER}', the new lines, '{_REPLACE}')"
        )
    return edits


def _target(project: Path, relative: str) -> Path:
    path = (project / relative).resolve()
    root = project.resolve()
    if Path(relative).is_absolute() or not path.is_relative_to(root):
        raise EditError(f"{relative} is outside the project; name files relative to its root")
    return path


def _locate(text_lines: list[str], search_lines: list[str]) -> list[int]:
    """Start indexes where ``search_lines`` match, ignoring trailing whitespace."""
    want = [line.rstrip() for line in search_lines]
    have = [line.rstrip() for line in text_lines]
    n = len(want)
    return [k for k in range(len(have) - n + 1) if have[k : k + n] == want]


def _closest(text_lines: list[str], search_lines: list[str]) -> str:
    first = search_lines[0].strip() if search_lines else ""
    matches = difflib.get_close_matches(first, [line.strip() for line in text_lines], n=1, cutoff=0.6)
    return f"; the closest line in the file is {matches[0]!r}" if matches else ""


def apply_edits(project: Path, edits: list[Edit]) -> dict[str, tuple[str, str]]:
    """Apply ``edits`` to the files under ``project``; returns {path: (old text, new text)}.

    Raises EditError (writing nothing) when a file is missing or outside the project, or a search text
    does not occur exactly once.
    """
    project = Path(project)
    texts: dict[str, tuple[str, str]] = {}
    for edit in edits:
        path = _target(project, edit.path)
        key = str(path.relative_to(project.resolve()))
        if key in texts:
            old, current = texts[key]
        elif edit.search is None and not path.exists():
            old = current = ""
        else:
            if not path.is_file():
                raise EditError(f"{edit.path} does not exist in the project")
            old = current = path.read_text(errors="replace")
        if edit.search is None:
            texts[key] = (old, edit.replace)
            continue
        lines = current.split("\n")
        search_lines = edit.search.split("\n")
        starts = _locate(lines, search_lines)
        if not starts:
            raise EditError(
                f"the SEARCH text for {edit.path} does not occur in the file (it must match the current "
                f"lines exactly){_closest(lines, search_lines)}"
            )
        if len(starts) > 1:
            lines_at = ", ".join(str(s + 1) for s in starts[:5])
            raise EditError(
                f"the SEARCH text for {edit.path} occurs {len(starts)} times (lines {lines_at}); quote more "
                "lines so it is unique"
            )
        start = starts[0]
        new_lines = lines[:start] + edit.replace.split("\n") + lines[start + len(search_lines) :]
        texts[key] = (old, "\n".join(new_lines))
    for key, (_, new) in texts.items():
        target = project / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(new)
    return texts


def unified_diff(changes: dict[str, tuple[str, str]]) -> str:
    """A git-style unified diff of applied edits (paths relative to the project root)."""
    parts = []
    for path in sorted(changes):
        old, new = changes[path]
        parts.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile=f"a/{path}" if old else "/dev/null",
                tofile=f"b/{path}",
            )
        )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in parts
    )


def edit_blocks(path: str, old: str, new: str, *, context: int = 2) -> str:
    """SEARCH/REPLACE blocks that turn ``old`` into ``new`` (the reply a model would give for that
    change): one block per group of changed lines, with ``context`` unchanged lines around it, widened
    until its search text is unique in ``old``."""
    old_lines, new_lines = old.split("\n"), new.split("\n")
    blocks = []
    for group in difflib.SequenceMatcher(None, old_lines, new_lines).get_grouped_opcodes(context):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        while len(_locate(old_lines, old_lines[i1:i2])) > 1 and (i1 > 0 or i2 < len(old_lines)):
            if i1 > 0:  # the lines around a group are equal on both sides
                i1, j1 = i1 - 1, j1 - 1
            if i2 < len(old_lines):
                i2, j2 = i2 + 1, j2 + 1
        search, replace = "\n".join(old_lines[i1:i2]), "\n".join(new_lines[j1:j2])
        blocks.append(f"{path}\n{_SEARCH}\n{search}\n{_DIVIDER}\n{replace}\n{_REPLACE}")
    return "\n\n".join(blocks)

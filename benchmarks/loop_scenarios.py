"""What the scripted model answers in the loop's tests and benchmark.

``known_fix`` is the reply a good model would give for an example: SEARCH/REPLACE blocks that turn its
source into the fixed version next to it. ``feedback_script`` walks the loop through every kind of
failure before the fix: a reply that is not in the format, an edit that does not compile, one that
compiles but transposes wrongly, then the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

from intelliperf.edits import edit_blocks
from tests.support.scripted_llm import dspy_reply

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MANIFEST: list[dict] = json.loads((EXAMPLES / "examples.json").read_text())
BY_NAME = {example["name"]: example for example in MANIFEST}

FEEDBACK_EXAMPLE = "transpose_bank"

GARBAGE = "Sure! The tile should be padded so that the column-wise reads hit different banks."

_TILE = "    __shared__ float tile[kTile][kTile];"
_READ = "            float v = tile[threadIdx.x][threadIdx.y + j];  // intelliperf: bankConflict"


def _block(path: str, search: str, replace: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE"


def fixed_source(name: str) -> tuple[str, str, str]:
    """(source file, original text, fixed text) of an example."""
    example = BY_NAME[name]
    source = example["source"]
    stem, suffix = source.rsplit(".", 1)
    folder = EXAMPLES / name
    return source, (folder / source).read_text(), (folder / f"{stem}_fixed.{suffix}").read_text()


def known_fix(name: str) -> str:
    source, original, fixed = fixed_source(name)
    return dspy_reply(edit=edit_blocks(source, original, fixed))


def feedback_script() -> list[str]:
    source = BY_NAME[FEEDBACK_EXAMPLE]["source"]
    does_not_compile = _block(source, _TILE, "    __shared__ float tile[kTile][kTlie + 1];")
    wrong = _block(
        source,
        _READ,
        "            float v = tile[threadIdx.y + j][threadIdx.x];  // reads the tile row-wise: no conflicts",
    )
    return [
        GARBAGE,
        dspy_reply(edit=does_not_compile),
        dspy_reply(edit=wrong),
        known_fix(FEEDBACK_EXAMPLE),
    ]

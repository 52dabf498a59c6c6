from __future__ import annotations

from pathlib import Path

import pytest

from intelliperf.edits import Edit, EditError, apply_edits, parse_edits, unified_diff

SOURCE = """#include <cuda_runtime.h>
__global__ void transpose(float* out, const float* in) {
    __shared__ float tile[32][32];
    tile[threadIdx.y][threadIdx.x] = in[0];
}
"""

REPLY = """The tile is read column-wise: pad it.

```cuda
src/transpose.cu
<<<<<<< SEARCH
    __shared__ float tile[32][32];
=======
    __shared__ float tile[32][33];  // padded: no bank conflicts
>>>>>>> REPLACE
```
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "transpose.cu").write_text(SOURCE)
    return tmp_path


def test_parse_and_apply_a_fenced_block_with_prose(project: Path) -> None:
    edits = parse_edits(REPLY)
    assert edits == [
        Edit(
            "src/transpose.cu",
            "    __shared__ float tile[32][32];",
            "    __shared__ float tile[32][33];  // padded: no bank conflicts",
        )
    ]
    changes = apply_edits(project, edits)
    assert "tile[32][33]" in (project / "src" / "transpose.cu").read_text()
    diff = unified_diff(changes)
    assert diff.startswith("--- a/src/transpose.cu\n+++ b/src/transpose.cu\n")
    assert "-    __shared__ float tile[32][32];\n+    __shared__ float tile[32][33];" in diff


@pytest.mark.parametrize(
    "name_line",
    ["**src/transpose.cu**", "`src/transpose.cu`", "// File: src/transpose.cu", "### src/transpose.cu"],
)
def test_decorated_file_names(name_line: str) -> None:
    reply = f"{name_line}\n<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n"
    assert parse_edits(reply)[0].path == "src/transpose.cu"


def test_whole_file_and_several_blocks(project: Path) -> None:
    reply = (
        "src/transpose.cu\r\n<<<<<<< SEARCH\r\n"
        "__global__ void transpose(float* out, const float* in) {\r\n=======\r\n"
        "__global__ void transpose(float* __restrict__ out, const float* __restrict__ in) {\r\n"
        ">>>>>>> REPLACE\r\n"
        "src/helper.cuh\n<<<<<<< FILE\n#pragma once\n>>>>>>> FILE\n"
    )
    changes = apply_edits(project, parse_edits(reply))
    assert set(changes) == {"src/transpose.cu", "src/helper.cuh"}
    assert (project / "src" / "helper.cuh").read_text() == "#pragma once\n"
    assert "/dev/null" in unified_diff(changes)


def test_trailing_whitespace_is_ignored_when_matching(project: Path) -> None:
    edits = [Edit("src/transpose.cu", "    __shared__ float tile[32][32];   ", "    int x;")]
    apply_edits(project, edits)
    assert "    int x;\n" in (project / "src" / "transpose.cu").read_text()


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("I would pad the tile.", "holds no edit"),
        ("<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE", "does not name its file"),
        ("f.cu\n<<<<<<< SEARCH\na\n=======\nb\n", "is not closed"),
        ("f.cu\n<<<<<<< SEARCH\n\n=======\nb\n>>>>>>> REPLACE", "is empty"),
        ("f.cu\n<<<<<<< FILE\nx\n", "is not closed"),
    ],
)
def test_malformed_replies(reply: str, message: str) -> None:
    with pytest.raises(EditError, match=message):
        parse_edits(reply)


def test_unappliable_edits_write_nothing(project: Path) -> None:
    before = (project / "src" / "transpose.cu").read_text()
    good = Edit("src/transpose.cu", "    tile[threadIdx.y][threadIdx.x] = in[0];", "    int y;")
    cases = [
        (Edit("src/transpose.cu", "    __shared__ float tile[32][31];", "x"), "does not occur.*closest line"),
        (Edit("src/missing.cu", "a", "b"), "does not exist"),
        (Edit("../outside.cu", "a", "b"), "outside the project"),
        (Edit("/etc/passwd", "a", "b"), "outside the project"),
    ]
    for bad, message in cases:
        with pytest.raises(EditError, match=message):
            apply_edits(project, [good, bad])
        assert (project / "src" / "transpose.cu").read_text() == before


def test_ambiguous_search_text(project: Path) -> None:
    (project / "src" / "twice.cu").write_text("x = 1;\ny = 2;\nx = 1;\n")
    with pytest.raises(EditError, match=r"occurs 2 times \(lines 1, 3\)"):
        apply_edits(project, [Edit("src/twice.cu", "x = 1;", "x = 3;")])

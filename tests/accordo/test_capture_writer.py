"""Capture files written from Python (accordo.capture_writer) repeat bytes by SAME records without hashing:
a snapshot already written (same file, same offset) and replaced bytes equal to the launch's snapshot
before the kernel or to the parameter's last snapshot after one. And ``equal_bytes``, which every such
comparison goes through, at the edges of its chunks."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from accordo_capture_writer import ScaleCapture

from accordo.capture import EQUAL_CHUNK, REC_BUFFER, REC_SAME, equal_bytes, read_capture
from accordo.capture_writer import CaptureWriter, write_capture


def record_types(path: Path) -> list[int]:
    blob, pos, types = path.read_bytes(), 16, []
    while pos < len(blob):
        rtype, _, length = struct.unpack_from("<IIQ", blob, pos)
        types.append(rtype)
        pos += 16 + length
    return types


def scale_capture(tmp_path: Path, launches: int, *, dedupe: bool) -> Path:
    path = tmp_path / f"scale-{launches}-{dedupe}.bin"
    path.write_bytes(ScaleCapture(n=4096, launches=launches, dedupe=dedupe).build())
    return path


def test_a_copy_writes_each_snapshot_of_its_source_once(tmp_path: Path) -> None:
    source = read_capture(scale_capture(tmp_path, 5, dedupe=True))
    copy_path = write_capture(source, tmp_path / "copy.bin")
    copy = read_capture(copy_path)
    types = record_types(copy_path)
    # the input x (before and after every launch), out before launch 0, out after launch 0 (repeated after)
    assert types.count(REC_BUFFER) == 3 and types.count(REC_SAME) == 5 * 4 - 3
    assert copy_path.stat().st_size <= source.path.stat().st_size
    for ours, theirs in zip(source.launches, copy.launches, strict=True):
        assert [(b.param_index, b.phase, b.tobytes()) for b in theirs.buffers] == [
            (b.param_index, b.phase, b.tobytes()) for b in ours.buffers
        ]


def test_snapshots_of_a_source_without_repeats_are_all_written(tmp_path: Path) -> None:
    """Equal bytes at different places of the source are not looked for: no hash of every snapshot."""
    source = read_capture(scale_capture(tmp_path, 3, dedupe=False))
    types = record_types(write_capture(source, tmp_path / "copy.bin"))
    assert types.count(REC_BUFFER) == 3 * 4 and REC_SAME not in types


def test_replaced_bytes_repeat_the_launch_before_or_the_last_after(tmp_path: Path) -> None:
    source = read_capture(scale_capture(tmp_path, 3, dedupe=False))
    x = np.arange(4096, dtype=np.float32) * 0.5
    y = (2 * x + 1).tobytes()
    other = (3 * x).tobytes()
    afters = [{0: x.tobytes(), 1: y}, {0: x.tobytes(), 1: y}, {0: x.tobytes(), 1: other}]
    path = tmp_path / "replayed.bin"
    with CaptureWriter(path) as writer:
        for launch, after in zip(source.launches, afters, strict=True):
            writer.launch(launch, launch.seq, module=None, after=after)
    replayed = read_capture(path)
    buffers = [t for t in record_types(path) if t in (REC_BUFFER, REC_SAME)]
    # per launch: in before, out before, in after (= in before: SAME), out after
    assert buffers == [
        REC_BUFFER, REC_BUFFER, REC_SAME, REC_BUFFER,  # launch 0: y is new
        REC_BUFFER, REC_BUFFER, REC_SAME, REC_SAME,  # launch 1: y again (the last after)
        REC_BUFFER, REC_BUFFER, REC_SAME, REC_BUFFER,  # launch 2: other is new
    ]  # fmt: skip
    got = [replayed.launches[i].buffer(1, "after").tobytes() for i in range(3)]  # type: ignore[union-attr]
    assert got == [y, y, other]
    assert all(launch.buffer(0, "after").tobytes() == x.tobytes() for launch in replayed.launches)  # type: ignore[union-attr]


@pytest.mark.parametrize("where", [0, EQUAL_CHUNK - 1, EQUAL_CHUNK, 2 * EQUAL_CHUNK + 16])
def test_equal_bytes_sees_one_differing_byte_anywhere(where: int) -> None:
    a = np.zeros(2 * EQUAL_CHUNK + 17, dtype=np.uint8)
    b = a.copy()
    assert equal_bytes(a, b)
    b[where] = 1
    assert not equal_bytes(a, b) and not equal_bytes(b.tobytes(), a.tobytes())


def test_equal_bytes_compares_bytes_not_elements() -> None:
    floats = np.arange(EQUAL_CHUNK // 2, dtype=np.float32)  # twice EQUAL_CHUNK bytes
    changed = floats.copy()
    changed[-1] = -1.0  # in the second chunk of bytes, past the first EQUAL_CHUNK elements' worth
    assert equal_bytes(floats, floats.copy()) and not equal_bytes(floats, changed)
    assert not equal_bytes(b"ab", b"abc") and equal_bytes(b"", b"")

"""read_capture on capture files written per profiler/native/FORMAT.md."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from accordo_capture_writer import (
    NO_LAUNCH,
    P,
    ScaleCapture,
    buffer,
    end,
    error,
    file_header,
    launch,
    module,
    record,
    same,
    shape,
    time,
)

from accordo.capture import CaptureBudgetError, over_budget, read_capture
from intelliperf.errors import ProfileError


def write(tmp_path: Path, blob: bytes, name: str = "c.bin") -> Path:
    path = tmp_path / name
    path.write_bytes(blob)
    return path


def test_scale_capture(tmp_path: Path) -> None:
    cap = read_capture(write(tmp_path, ScaleCapture(n=10, launches=2).build()))
    assert cap.complete and not cap.truncated and cap.errors == ()
    assert [x.seq for x in cap.launches] == [0, 1]
    first = cap.launches[0]
    assert first.launch_index == 0
    assert first.name == "_Z5scalePKfPfi" and first.demangled.startswith("scale(")
    p_in, p_out, p_n = first.params
    assert (p_in.kind, p_in.alloc_size, p_in.alloc_offset) == ("pointer", 40, 0)
    assert p_out.kind == "pointer" and p_out.pointer == 0x7F0000001000
    assert p_n.kind == "scalar" and p_n.scalar(np.int32) == 10 and p_n.raw == struct.pack("<i", 10)
    before_in, after_in = first.buffer(0, "before"), first.buffer(0, "after")
    assert before_in is not None and after_in is not None
    assert before_in.tobytes() == after_in.tobytes()
    out_after = first.buffer(1, "after")
    assert out_after is not None
    np.testing.assert_array_equal(out_after.view(np.float32), 2 * np.arange(10, dtype=np.float32) * 0.5 + 1)
    assert out_after.data.dtype == np.uint8 and out_after.data.size == 40
    assert not out_after.data.flags.writeable
    assert first.start_ns == 0 and first.duration_ns == 250
    assert first.complete
    assert cap.for_kernel("scale(float const*, float*, int)") == cap.launches


def test_buffers_are_views_not_copies(tmp_path: Path) -> None:
    cap = read_capture(write(tmp_path, ScaleCapture(n=1 << 16, launches=1).build()))
    data = cap.launches[0].buffers[0].data
    assert data.base is not None  # a view over the memory map
    assert data.size == 4 << 16


def test_missing_end_means_incomplete(tmp_path: Path) -> None:
    cap = read_capture(write(tmp_path, ScaleCapture().build(with_end=False)))
    assert not cap.complete and not cap.truncated
    assert len(cap.launches) == 2


def test_truncated_inside_a_record(tmp_path: Path) -> None:
    blob = ScaleCapture().build()
    # Cut in the middle of the second launch's first buffer.
    second = blob.index(b"_Z5scalePKfPfi", blob.index(b"_Z5scalePKfPfi") + 1)
    cap = read_capture(write(tmp_path, blob[: second + 200]))
    assert cap.truncated and not cap.complete
    assert len(cap.launches) == 2
    assert cap.launches[0].complete
    assert not cap.launches[1].complete
    # Cut inside a record header.
    cap = read_capture(write(tmp_path, file_header() + b"\x01\x00\x00"))
    assert cap.truncated and cap.launches == ()


def test_zero_launches(tmp_path: Path) -> None:
    cap = read_capture(write(tmp_path, file_header() + end()))
    assert cap.complete and cap.launches == () and cap.errors == ()


def test_errors_and_crashed_kernel(tmp_path: Path) -> None:
    params = [P(0, 0, 8, 1, pointer=(0x1000, 0x1000, 16)), P(1, 8, 8, 2)]
    blob = (
        file_header()
        + error(NO_LAUNCH, "a global problem")
        + launch(0, 0, "k", "k", params)
        + buffer(0, 0, 0, 0x1000, bytes(16))
        + error(0, "the kernel (cuCtxSynchronize after it) failed: CUDA_ERROR_ILLEGAL_ADDRESS")
        + end()
    )
    cap = read_capture(write(tmp_path, blob))
    assert [(e.seq, e.message[:8]) for e in cap.errors] == [(None, "a global"), (0, "the kern")]
    (only,) = cap.launches
    assert not only.complete
    assert "ILLEGAL_ADDRESS" in only.errors[0]
    assert only.buffer(0, "after") is None
    assert only.params[1].kind == "unavailable" and only.params[1].raw == b""
    assert only.start_ns is None and only.duration_ns is None


def test_a_launch_left_out_for_the_budget_is_an_error_naming_the_launch(tmp_path: Path) -> None:
    params = [P(0, 0, 8, 1, pointer=(0x1000, 0x1000, 16))]
    why = "capture budget: this launch's buffers need up to 32 bytes and 96 are written; the budget is 100"
    blob = (
        file_header()
        + launch(0, 0, "_Z1kPf", "k(float*)", params)
        + buffer(0, 0, 0, 0x1000, bytes(16))
        + buffer(0, 0, 1, 0x1000, bytes(16))
        + launch(1, 1, "_Z1kPf", "k(float*)", params)
        + error(1, why)
        + end()
    )
    cap = read_capture(write(tmp_path, blob))
    problem = over_budget([cap])
    assert isinstance(problem, CaptureBudgetError) and isinstance(problem, ProfileError)
    assert problem.message.startswith("launch 2 of k(float*) was not captured: this launch's buffers need")
    assert "the budget is 100" in problem.message and "INTELLIPERF_CAPTURE_BUDGET_BYTES" in str(problem)


def test_other_launch_errors_are_not_the_budget(tmp_path: Path) -> None:
    params = [P(0, 0, 8, 1, pointer=(0x1000, 0x1000, 16))]
    blob = (
        file_header()
        + error(NO_LAUNCH, "capture budget: a setup error is not a launch's")
        + launch(0, 0, "k", "k", params)
        + error(0, "the launch is being captured into a CUDA graph; buffers not captured")
        + end()
    )
    assert over_budget([read_capture(write(tmp_path, blob))]) is None


def test_deduplicated_allocation(tmp_path: Path) -> None:
    base = 0x2000
    params = [
        P(0, 0, 8, 1, pointer=(base, base, 64)),
        P(1, 8, 8, 1, pointer=(base + 32, base, 64)),
        P(2, 16, 8, 0, raw=bytes(8)),
    ]
    data = bytes(range(64))
    blob = (
        file_header()
        + launch(3, 0, "add_kernel", "add_kernel", params)
        + buffer(0, 0, 0, base, data)
        + buffer(0, 0, 1, base, data)
        + end()
    )
    (x,) = read_capture(write(tmp_path, blob)).launches
    assert x.launch_index == 3
    shared = x.buffer(1, "after")
    assert shared is not None and shared.param_index == 0
    assert x.params[1].alloc_offset == 32
    assert shared.view(np.uint8, byte_offset=x.params[1].alloc_offset)[0] == 32
    assert x.buffer(2, "before") is None


def test_same_records_resolve_to_the_bytes_they_repeat(tmp_path: Path) -> None:
    full = read_capture(write(tmp_path, ScaleCapture(n=100, launches=3).build(), "full.bin"))
    blob = ScaleCapture(n=100, launches=3, dedupe=True).build()
    assert blob.count(struct.pack("<IIQ", 6, 0, 48)) == 9  # all but 3 of the 12 snapshots
    cap = read_capture(write(tmp_path, blob, "same.bin"))
    assert cap.complete and not cap.truncated
    for a, b in zip(full.launches, cap.launches, strict=True):
        assert b.complete
        assert [(x.seq, x.param_index, x.phase, x.base, x.nbytes) for x in a.buffers] == [
            (x.seq, x.param_index, x.phase, x.base, x.nbytes) for x in b.buffers
        ]
        for x, y in zip(a.buffers, b.buffers, strict=True):
            assert x.tobytes() == y.tobytes()
            np.testing.assert_array_equal(x.view(np.float32), y.view(np.float32))
    first, _, third = cap.launches
    # launch 2's "before" of out repeats launch 1's "after", a SAME of launch 0's "after": a chain
    out_before, out_after = third.buffer(1, "before"), first.buffer(1, "after")
    assert out_before is not None and out_after is not None
    assert out_before.file_offset == out_after.file_offset and out_before.seq == 2
    in_after, in_before = third.buffer(0, "after"), first.buffer(0, "before")
    assert in_after is not None and in_before is not None
    assert in_after.file_offset == in_before.file_offset and in_after.phase == "after"
    assert in_after.data.base is not None  # still a view over the map


def _same_blob(*tail: bytes) -> bytes:
    params = [P(0, 0, 8, 1, pointer=(0x1000, 0x1000, 16))]
    return (
        file_header()
        + launch(0, 0, "k", "k", params)
        + buffer(0, 0, 0, 0x1000, bytes(range(16)))
        + b"".join(tail)
    )


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_same_blob(same(0, 0, 1, 0x1000, 16, (0, 0, 1))), "no earlier record holds"),  # itself
        (_same_blob(same(0, 0, 1, 0x1000, 16, (7, 0, 0))), "no earlier record holds"),
        (_same_blob(same(0, 0, 1, 0x1000, 16, (0, 0, 5))), "no earlier record holds"),
        (_same_blob(same(0, 0, 1, 0x1000, 8, (0, 0, 0))), "the record it repeats 16"),
        (_same_blob(same(3, 0, 1, 0x1000, 16, (0, 0, 0))), "inconsistent"),
        (_same_blob(same(0, 0, 2, 0x1000, 16, (0, 0, 0))), "inconsistent"),
        (_same_blob(record(6, same(0, 0, 1, 0x1000, 16, (0, 0, 0))[16:40])), "shorter"),
        (_same_blob(record(6, same(0, 0, 1, 0x1000, 16, (0, 0, 0))[16:] + b"!")), "trailing"),
        # a forward reference: the BUFFER it names comes later
        (_same_blob(same(0, 0, 1, 0x1000, 16, (0, 1, 1)), buffer(0, 1, 1, 0x1000, bytes(16))), "no earlier"),
    ],
)
def test_corrupt_same_records(tmp_path: Path, blob: bytes, message: str) -> None:
    with pytest.raises(ProfileError, match="corrupt capture file.*" + message):
        read_capture(write(tmp_path, blob))


def test_truncated_same_record(tmp_path: Path) -> None:
    blob = _same_blob(same(0, 0, 1, 0x1000, 16, (0, 0, 0)))
    ok = read_capture(write(tmp_path, blob + end()))
    (x,) = ok.launches
    assert x.complete and x.buffer(0, "after") is not None
    for cut in (1, 20, 63):  # inside the record header, inside the payload, one byte short
        cap = read_capture(write(tmp_path, blob[:-cut]))
        assert cap.truncated and not cap.complete
        (x,) = cap.launches
        assert x.buffer(0, "before") is not None and x.buffer(0, "after") is None
        assert not x.complete


def test_unknown_record_types_are_skipped(tmp_path: Path) -> None:
    blob = file_header() + record(99, b"future stuff") + ScaleCapture(launches=1).build()[16:]
    cap = read_capture(write(tmp_path, blob))
    assert cap.complete and len(cap.launches) == 1


def test_time_for_unknown_launch_is_ignored(tmp_path: Path) -> None:
    cap = read_capture(write(tmp_path, file_header() + time(7, 1, 2) + end()))
    assert cap.complete and cap.launches == ()


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (b"", "not an Accordo capture"),
        (b"garbage garbage garbage", "bad magic"),
        (b"ACCORDO1" + struct.pack("<II", 2, 0), "version 2"),
        (file_header() + buffer(5, 0, 0, 0, b"xx"), "inconsistent"),
        (file_header() + record(1, b"\x00" * 10), "shorter"),
        (file_header() + launch(0, 0, "k", "k", [P(0, 0, 4, 7)]), "kind 7"),
        (file_header() + launch(0, 0, "k", "k", []) + launch(0, 0, "k", "k", []), "repeats"),
        (file_header() + record(1, launch(0, 0, "k", "k", [])[16:] + b"!"), "trailing"),
    ],
)
def test_corrupt_files(tmp_path: Path, blob: bytes, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        read_capture(write(tmp_path, blob))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="does not exist"):
        read_capture(tmp_path / "nope.bin")


def test_shape_and_module_records(tmp_path: Path) -> None:
    """A launch's SHAPE and the MODULE its kernel ran from (the one its SHAPE names by index)."""
    name = "_Z5scalePKfPfi"
    blob = (
        file_header()
        + module(0, [name], b"\x7fELF first")
        + launch(0, 0, name, "scale(float const*, float*, int)", [])
        + shape(
            0,
            (4, 1, 1),
            (256, 1, 1),
            dynamic_shared=1024,
            flags=2,
            stream=0x55,
            persisting_l2=9830400,
            module=0,
        )
        + module(1, [name, "_Z5otherv"], b"\x7fELF second")
        + launch(1, 1, name, "scale(float const*, float*, int)", [])
        + shape(1, (8, 2, 1), (128, 1, 1), flags=1)
        + end()
    )
    cap = read_capture(write(tmp_path, blob))
    first, second = cap.launches
    assert first.shape is not None and second.shape is not None
    assert (first.shape.grid, first.shape.block, first.shape.dynamic_shared) == ((4, 1, 1), (256, 1, 1), 1024)
    assert (first.shape.per_thread, first.shape.graph_capture, first.shape.stream) == (True, False, 0x55)
    assert (first.shape.persisting_l2, first.shape.module) == (9830400, 0)
    assert (second.shape.graph_capture, second.shape.persisting_l2, second.shape.module) == (True, None, None)
    assert [m.names for m in cap.modules] == [(name,), (name, "_Z5otherv")]
    assert cap.module_of(first) is cap.modules[0] and cap.modules[0].image == b"\x7fELF first"
    assert cap.module_of(second) is None  # its SHAPE names no module


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (file_header() + shape(3, (1, 1, 1), (1, 1, 1)), "names launch 3, which no LAUNCH precedes"),
        (
            file_header()
            + launch(0, 0, "k", "k", [])
            + record(7, shape(0, (1, 1, 1), (1, 1, 1))[16:] + b"!"),
            "trailing",
        ),
        (file_header() + record(8, module(0, ["k"], b"abcd")[16:-1]), "says 4 image bytes, holds 3"),
        (file_header() + record(8, struct.pack("<QI", 0, 5)), "shorter"),
    ],
)
def test_corrupt_shape_and_module_records(tmp_path: Path, blob: bytes, message: str) -> None:
    with pytest.raises(ProfileError, match="corrupt capture file.*" + message):
        read_capture(write(tmp_path, blob))

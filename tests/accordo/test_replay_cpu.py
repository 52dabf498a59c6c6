"""The replay's pieces that need no GPU: captures written from Python (accordo.capture_writer), what makes a
launch replayable, the launch pattern, the timing agreement at its edge, a reproducer's errors, and the
replay's orchestration (buffers placed, pointers moved, outputs read back) with a driver that runs a
Python stand-in for the kernel (accordo.replay takes any object with the Driver's calls)."""

from __future__ import annotations

import dataclasses
import json
import mmap
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from accordo.capture import Capture, LaunchShape, Module, read_capture
from accordo.capture_writer import write_capture
from accordo.replay import replay_outputs, replay_problem
from accordo.replay_check import AGREEMENT, launch_pattern_problem, speedups_disagree
from accordo.reproducer import check_reproducer
from intelliperf.errors import ProfileError

ROOT = Path(__file__).resolve().parents[2]
BLOCK_SUM = ROOT / "tests" / "fixtures" / "captures" / "block_sum"
VARIABLES_CUBIN = ROOT / "tests" / "fixtures" / "cubins" / "variables_sm90.cubin"
# An ELF64 little-endian header with no sections: a module image that holds no variables.
_EMPTY_ELF = (
    b"\x7fELF\x02\x01\x01"
    + bytes(9)
    + struct.pack("<HHIQQQIHHHHHH", 1, 190, 1, 0, 0, 0, 0, 64, 0, 0, 64, 0, 0)
)
SHAPE = LaunchShape(
    grid=(17, 1, 1),
    block=(256, 1, 1),
    dynamic_shared=0,
    stream=0,
    per_thread=False,
    graph_capture=False,
    persisting_l2=9830400,
    module=0,
)


def _record_types(path: Path) -> list[int]:
    blob, pos, types = path.read_bytes(), 16, []
    while pos < len(blob):
        rtype, _, length = struct.unpack_from("<IIQ", blob, pos)
        types.append(rtype)
        pos += 16 + length
    return types


def _module(tmp_path: Path, names: tuple[str, ...], image_bytes: bytes | None = None) -> Module:
    """A MODULE record of ``names``: a real cubin (``image_bytes``) or, by default, a minimal ELF64 header."""
    image = tmp_path / "image.bin"
    image.write_bytes(image_bytes if image_bytes is not None else _EMPTY_ELF)
    with image.open("rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return Module(0, names, len(data), 0, data)


def _with_shapes(capture: Capture, module: Module) -> Capture:
    """``capture`` as a library with SHAPE and MODULE records would have written it."""
    launches = tuple(dataclasses.replace(x, shape=SHAPE) for x in capture.launches)
    return dataclasses.replace(capture, launches=launches, modules=(module,))


def test_a_capture_written_from_python_reads_back_the_same(tmp_path: Path) -> None:
    original = read_capture(BLOCK_SUM / "reference-1.bin")
    module = _module(tmp_path, (original.launches[0].name,))
    path = write_capture(_with_shapes(original, module), tmp_path / "copy.bin")
    copy = read_capture(path)
    assert copy.complete and len(copy.launches) == len(original.launches) == 5
    for ours, theirs in zip(original.launches, copy.launches, strict=True):
        assert (theirs.seq, theirs.name, theirs.params, theirs.errors) == (
            ours.seq,
            ours.name,
            ours.params,
            ours.errors,
        )
        assert [(b.param_index, b.phase, b.tobytes()) for b in theirs.buffers] == [
            (b.param_index, b.phase, b.tobytes()) for b in ours.buffers
        ]
        assert theirs.shape == SHAPE and copy.module_of(theirs) is not None
    assert copy.modules[0].image == module.image and copy.modules[0].names == module.names
    # the copy holds the source's snapshots as the source holds them (this recording predates the native
    # library's SAME records: every snapshot a BUFFER), no more (test_capture_writer: repeats kept)
    assert _record_types(path).count(2) == _record_types(BLOCK_SUM / "reference-1.bin").count(2)


def test_a_copy_of_some_launches_keeps_only_those(tmp_path: Path) -> None:
    original = read_capture(BLOCK_SUM / "reference-1.bin")
    capture = _with_shapes(original, _module(tmp_path, (original.launches[0].name,)))
    copy = read_capture(write_capture(capture, tmp_path / "one.bin", [capture.launches[1]]))
    assert [x.seq for x in copy.launches] == [1] and len(copy.modules) == 1


def test_what_makes_a_launch_replayable(tmp_path: Path) -> None:
    original = read_capture(BLOCK_SUM / "reference-1.bin")
    launch = original.launches[0]
    assert "no launch shape" in (replay_problem(original, launch) or "")
    capture = _with_shapes(original, _module(tmp_path, (launch.name,)))
    assert replay_problem(capture, capture.launches[0]) is None
    graph = dataclasses.replace(capture.launches[0], shape=dataclasses.replace(SHAPE, graph_capture=True))
    assert "CUDA graph" in (replay_problem(capture, graph) or "")
    assert "no module" in (
        replay_problem(dataclasses.replace(capture, modules=()), capture.launches[0]) or ""
    )
    gone = dataclasses.replace(
        capture.launches[0],
        params=(*capture.launches[0].params[:2], dataclasses.replace(launch.params[2], kind="unavailable")),
    )
    assert "unavailable" in (replay_problem(capture, gone) or "")
    half = dataclasses.replace(capture.launches[0], buffers=capture.launches[0].buffers[:2])
    assert "incomplete" in (replay_problem(capture, half) or "")


def _pattern(capture: Capture, **changes: object) -> Capture:
    shapes = [dataclasses.replace(SHAPE, **changes) for _ in capture.launches]
    return dataclasses.replace(
        capture,
        launches=tuple(
            dataclasses.replace(x, shape=s) for x, s in zip(capture.launches, shapes, strict=True)
        ),
    )


def test_the_launch_pattern_compares_streams_graphs_and_the_persisting_l2_limit() -> None:
    original = read_capture(BLOCK_SUM / "reference-1.bin")
    reference = _pattern(original)
    assert launch_pattern_problem(reference, _pattern(original)) is None
    assert launch_pattern_problem(original, _pattern(original, stream=7)) is None  # no SHAPE: not compared
    assert launch_pattern_problem(reference, _pattern(original, stream=7)) is None  # one stream each
    two = dataclasses.replace(
        reference,
        launches=(
            dataclasses.replace(reference.launches[0], shape=dataclasses.replace(SHAPE, stream=7)),
            *reference.launches[1:],
        ),
    )
    assert "on 1 stream(s), the candidate on 2" in (launch_pattern_problem(reference, two) or "")
    assert "CUDA graph" in (launch_pattern_problem(reference, _pattern(original, graph_capture=True)) or "")
    carve_out = launch_pattern_problem(reference, _pattern(original, persisting_l2=31457280))
    assert carve_out is not None and "31457280 bytes" in carve_out and "9830400 bytes" in carve_out


def test_timing_agreement_at_its_edge() -> None:
    assert AGREEMENT == 2.0
    assert not speedups_disagree(4.0, 2.0, 1.0)  # exactly 2x from the flushed replay
    assert speedups_disagree(4.0 * (1 + 1e-9), 2.0, 1.0)
    assert not speedups_disagree(4.0, 1.0, 2.0)  # either replay may agree
    assert speedups_disagree(1.0, 0.49, 3.0)  # below one, above the other: both more than 2x away
    assert not speedups_disagree(0.5, 1.0, 5.0)  # slower in the application counts too
    with pytest.raises(ValueError, match="positive"):
        speedups_disagree(1.0, 0.0, 1.0)


def test_a_folder_that_is_not_a_reproducer_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=re.escape("lacks reference.bin, candidate.bin, reproducer.json")):
        check_reproducer(tmp_path)
    for name in ("reference.bin", "candidate.bin"):
        (tmp_path / name).write_bytes((BLOCK_SUM / "reference-1.bin").read_bytes())
    (tmp_path / "reproducer.json").write_text(json.dumps({"kernel": "block_sum"}))
    with pytest.raises(ProfileError, match="not a reproducer manifest"):
        check_reproducer(tmp_path)


class PythonDriver:
    """The Driver's calls over host memory; ``launch`` runs block_sum's contract in NumPy (each block of 256
    inputs summed into its output slot) so that a replay's orchestration can be checked end to end."""

    def __init__(self) -> None:
        self.memory: dict[int, bytearray] = {}
        self.next = 0x10000
        self.launched: list[tuple[str, list[bytes]]] = []
        self.variables: dict[str, int] = {}
        self.queue_seen: list[int] = []

    def _at(self, ptr: int) -> tuple[bytearray, int]:
        for base, block in self.memory.items():
            if base <= ptr < base + len(block):
                return block, ptr - base
        raise AssertionError(f"{ptr:#x} is in no allocation")

    def load_module(self, image: bytes) -> bytes:
        return image

    def module_function(self, module: bytes, name: str) -> str:
        return name

    def module_variable(self, module: bytes, name: str) -> tuple[int, int]:
        """Each variable 4 bytes, loaded as 7 (queue_next, the one the stand-in kernel takes from)."""
        if name not in self.variables:
            self.variables[name] = self.alloc(4)
            self.upload(self.variables[name], struct.pack("<I", 7))
        return self.variables[name], 4

    def allow_dynamic_shared(self, function: str, nbytes: int) -> None:
        assert nbytes == 0

    def alloc(self, nbytes: int) -> int:
        ptr, self.next = self.next, self.next + nbytes + 0x1000
        self.memory[ptr] = bytearray(nbytes)
        return ptr

    def free(self, ptr: int) -> None:
        del self.memory[ptr]

    def upload(self, ptr: int, data: bytes | memoryview) -> None:
        block, offset = self._at(ptr)
        block[offset : offset + len(data)] = bytes(data)

    def download(self, ptr: int, nbytes: int) -> bytes:
        block, offset = self._at(ptr)
        return bytes(block[offset : offset + nbytes])

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        self.upload(dst, self.download(src, nbytes))

    def fill(self, ptr: int, value: int, nbytes: int) -> None:
        self.upload(ptr, bytes([value]) * nbytes)

    def synchronize(self) -> None:
        pass

    def launch(self, function: str, grid: tuple, block: tuple, shared: int, params: list[bytes]) -> None:
        self.launched.append((function, params))
        if "queue_next" in self.variables:  # a work queue's counter: read, then drained
            (seen,) = struct.unpack("<I", self.download(self.variables["queue_next"], 4))
            self.queue_seen.append(seen)
            self.upload(self.variables["queue_next"], struct.pack("<I", 1 << 30))
        (src,), (dst,), (n,) = (
            struct.unpack("<Q", params[0]),
            struct.unpack("<Q", params[1]),
            struct.unpack("<i", params[2]),
        )
        values = np.frombuffer(self.download(src, 4 * n), dtype=np.float32)
        sums = [values[i : i + 256].sum(dtype=np.float32) for i in range(0, n, 256)]
        self.upload(dst, np.asarray(sums, dtype=np.float32).tobytes())


def test_a_replay_places_the_buffers_moves_the_pointers_and_reads_the_outputs(tmp_path: Path) -> None:
    original = read_capture(BLOCK_SUM / "reference-1.bin")
    capture = _with_shapes(original, _module(tmp_path, (original.launches[0].name,)))
    source = write_capture(capture, tmp_path / "ref.bin")
    driver = PythonDriver()
    answer = replay_outputs(source, tmp_path / "replayed.bin", driver)  # type: ignore[arg-type]
    assert answer == {"launches": 5}
    replayed = read_capture(tmp_path / "replayed.bin")
    assert len(driver.launched) == 5 and not driver.memory  # every allocation freed
    assert not driver.variables  # the stand-in image is no cubin with variables
    for launch, (function, params) in zip(capture.launches, driver.launched, strict=True):
        assert function == launch.name and params[2] == launch.params[2].raw  # the scalar as captured
        moved = [struct.unpack("<Q", p)[0] for p in params[:2]]
        captured = [launch.params[i].pointer for i in (0, 1)]
        assert moved != captured  # new allocations, same offsets inside them
        assert moved[1] - moved[0] != 0
    for ours, theirs in zip(capture.launches, replayed.launches, strict=True):
        n = int(ours.params[2].scalar(np.int32))
        values = ours.buffer(0, "before").view(np.float32, count=n)  # type: ignore[union-attr]
        expected = np.asarray(
            [values[i : i + 256].sum(dtype=np.float32) for i in range(0, n, 256)], np.float32
        )
        out = theirs.buffer(1, "after")
        assert out is not None
        np.testing.assert_array_equal(out.view(np.float32, count=len(expected)), expected)
        assert theirs.buffer(0, "after").tobytes() == ours.buffer(0, "after").tobytes()  # type: ignore[union-attr]


def test_every_replayed_launch_starts_from_the_modules_variables_as_loaded(tmp_path: Path) -> None:
    """A work-queue kernel drains its counter; the capture holds its buffers, not the counter. Each of the
    five replayed launches must find the counter as the module was loaded, not drained by the launch
    before (the timed replay of examples/work_queue did nothing from its second launch on)."""
    original = read_capture(BLOCK_SUM / "reference-1.bin")
    module = _module(tmp_path, (original.launches[0].name,), VARIABLES_CUBIN.read_bytes())
    source = write_capture(_with_shapes(original, module), tmp_path / "ref.bin")
    driver = PythonDriver()
    assert replay_outputs(source, tmp_path / "replayed.bin", driver) == {"launches": 5}  # type: ignore[arg-type]
    assert set(driver.variables) == {"queue_next", "running_total", "launches_seen"}
    assert driver.queue_seen == [7, 7, 7, 7, 7]


def test_a_replay_refuses_a_capture_it_cannot_replay(tmp_path: Path) -> None:
    source = write_capture(read_capture(BLOCK_SUM / "reference-1.bin"), tmp_path / "old.bin")
    answer = replay_outputs(source, tmp_path / "replayed.bin", PythonDriver())  # type: ignore[arg-type]
    assert "no launch shape" in str(answer["problem"]) and not (tmp_path / "replayed.bin").exists()

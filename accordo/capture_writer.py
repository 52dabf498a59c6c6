"""Writing capture files from Python (profiler/native/FORMAT.md), for what is made of other captures: a
replay's results (accordo.replay: the launches as captured, the snapshots after the kernel replaced by what
the replayed kernel wrote) and a reproducer's trimmed capture (accordo.reproducer).

A snapshot is written as a SAME record, so that a loop of launches on one input costs that input once, when
it is known to repeat one already written: a snapshot of an existing capture whose bytes (file and offset)
were written before, and replaced bytes (``after``) equal to the same launch's snapshot before the kernel or
to the last snapshot after a kernel of the same parameter. Those are compared byte for byte; nothing is
hashed and no snapshot is copied out of its memory map: a capture of 20 launches on 64 MiB buffers is
written in the time its unique bytes take to write (hashing every snapshot took 17 s of it on the GPU
machine's CPU).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from .capture import (
    MAGIC,
    PARAM_KINDS,
    PHASES,
    REC_BUFFER,
    REC_END,
    REC_ERROR,
    REC_LAUNCH,
    REC_MODULE,
    REC_SAME,
    REC_SHAPE,
    REC_TIME,
    UNKNOWN,
    VERSION,
    Buffer,
    Capture,
    Launch,
    LaunchShape,
    Module,
    equal_bytes,
)

__all__ = ["CaptureWriter", "write_capture"]

_KINDS = {name: code for code, name in PARAM_KINDS.items()}
_PHASES = {name: code for code, name in PHASES.items()}


def _text(value: str) -> bytes:
    encoded = value.encode()
    return struct.pack("<I", len(encoded)) + encoded


class CaptureWriter:
    """One capture file, written record by record; ``close`` (or leaving the ``with``) writes END."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file = self.path.open("wb")
        self._file.write(MAGIC + struct.pack("<II", VERSION, 0))
        # snapshots written, by their bytes' place in their own capture file -> (seq, param, phase)
        self._written: dict[tuple[int, int, int], tuple[int, int, int]] = {}
        # parameter -> the last replaced snapshot after a kernel: its bytes and (seq, param, phase)
        self._last_after: dict[int, tuple[bytes, tuple[int, int, int]]] = {}

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _record(self, rtype: int, payload: bytes) -> None:
        self._file.write(struct.pack("<IIQ", rtype, 0, len(payload)))
        self._file.write(payload)

    def module(self, module: Module, index: int) -> None:
        head = struct.pack("<QI", index, len(module.names)) + b"".join(_text(n) for n in module.names)
        self._record(REC_MODULE, head + struct.pack("<Q", module.nbytes) + module.image)

    def launch(
        self,
        launch: Launch,
        seq: int,
        *,
        module: int | None,
        after: Mapping[int, bytes] | None = None,
        errors: tuple[str, ...] = (),
    ) -> None:
        """``launch`` as launch ``seq``, its kernel in MODULE ``module``; ``after`` (allocation owner's
        parameter index -> bytes) replaces its snapshots after the kernel."""
        payload = struct.pack("<QQ", launch.launch_index, seq) + _text(launch.name) + _text(launch.demangled)
        payload += struct.pack("<I", len(launch.params))
        for p in launch.params:
            payload += struct.pack("<IIII", p.index, p.offset, p.size, _KINDS[p.kind])
            if p.kind == "scalar":
                payload += p.raw
            elif p.kind == "pointer":
                payload += struct.pack("<QQQ", p.pointer or 0, p.alloc_base or 0, p.alloc_size or 0)
        self._record(REC_LAUNCH, payload)
        if launch.shape is not None:
            self._shape(seq, launch.shape, module)
        for message in (*launch.errors, *errors):
            encoded = message.encode()
            self._record(REC_ERROR, struct.pack("<QI", seq, len(encoded)) + encoded)
        before: dict[int, tuple[Buffer, tuple[int, int, int]]] = {}
        for buffer in launch.buffers:
            if buffer.phase == "before":
                before[buffer.param_index] = (buffer, self._copy(seq, buffer))
        for buffer in launch.buffers:
            if buffer.phase != "after":
                continue
            if after is None:
                self._copy(seq, buffer)
            else:
                self._replaced(seq, buffer, after[buffer.param_index], before.get(buffer.param_index))
        if launch.start_ns is not None and launch.end_ns is not None:
            self._record(REC_TIME, struct.pack("<QQQ", seq, launch.start_ns, launch.end_ns))

    def _shape(self, seq: int, shape: LaunchShape, module: int | None) -> None:
        flags = (1 if shape.graph_capture else 0) | (2 if shape.per_thread else 0)
        self._record(
            REC_SHAPE,
            struct.pack(
                "<QIIIIIIIIQQQ",
                seq,
                *shape.grid,
                *shape.block,
                shape.dynamic_shared,
                flags,
                shape.stream,
                UNKNOWN if shape.persisting_l2 is None else shape.persisting_l2,
                UNKNOWN if module is None else module,
            ),
        )

    def _copy(self, seq: int, buffer: Buffer) -> tuple[int, int, int]:
        """``buffer``, a snapshot of an existing capture, for launch ``seq``; the record holding its bytes."""
        here = (seq, buffer.param_index, _PHASES[buffer.phase])
        source = (buffer.source_id, buffer.file_offset, buffer.nbytes)
        same = self._written.get(source)
        if same is not None:
            self._same(here, buffer.base, buffer.nbytes, same)
            return same
        self._bytes(here, buffer.base, buffer.raw)
        self._written[source] = here
        return here

    def _replaced(
        self, seq: int, buffer: Buffer, data: bytes, before: tuple[Buffer, tuple[int, int, int]] | None
    ) -> None:
        here = (seq, buffer.param_index, _PHASES["after"])
        last = self._last_after.get(buffer.param_index)
        same = None
        if before is not None and before[0].nbytes == len(data) and equal_bytes(before[0].data, data):
            same = before[1]
        elif last is not None and len(last[0]) == len(data) and equal_bytes(last[0], data):
            same = last[1]
        if same is not None:
            self._same(here, buffer.base, len(data), same)
            self._last_after[buffer.param_index] = (data, same)
            return
        self._bytes(here, buffer.base, data)
        self._last_after[buffer.param_index] = (data, here)

    def _same(self, here: tuple[int, int, int], base: int, nbytes: int, same: tuple[int, int, int]) -> None:
        self._record(REC_SAME, struct.pack("<QIIQQ", *here, base, nbytes) + struct.pack("<QII", *same))

    def _bytes(self, here: tuple[int, int, int], base: int, data: bytes | memoryview) -> None:
        head = struct.pack("<QIIQQ", *here, base, len(data))
        self._file.write(struct.pack("<IIQ", REC_BUFFER, 0, len(head) + len(data)))
        self._file.write(head)
        self._file.write(data)  # a memoryview of a capture's map is written without a copy

    def close(self) -> None:
        if self._file.closed:
            return
        self._record(REC_END, b"")
        self._file.close()


def write_capture(capture: Capture, path: str | Path, launches: Sequence[Launch] | None = None) -> Path:
    """A copy of ``capture`` (of its ``launches`` only, when given) with the modules they ran from."""
    chosen = capture.launches if launches is None else tuple(launches)
    kept = {m.index for x in chosen if (m := capture.module_of(x)) is not None}
    with CaptureWriter(path) as writer:
        for module in capture.modules:
            if module.index in kept:
                writer.module(module, module.index)
        for launch in chosen:
            writer.launch(launch, launch.seq, module=launch.shape.module if launch.shape else None)
    return Path(path)

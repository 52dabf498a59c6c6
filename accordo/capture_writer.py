"""Writing capture files from Python (accordo/native/FORMAT.md), for what is made of other captures: a
replay's results (accordo.replay: the launches as captured, the snapshots after the kernel replaced by what
the replayed kernel wrote) and a reproducer's trimmed capture (accordo.reproducer).

Snapshots whose bytes equal an earlier one of the same length are written as SAME records, so a loop of
launches on one input costs that input once. Equal means an equal 128-bit blake2b digest of the bytes (no
copy of earlier snapshots is kept to compare with; a collision is as likely as a random 128-bit match).
"""

from __future__ import annotations

import hashlib
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
    Capture,
    Launch,
    LaunchShape,
    Module,
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
        self._seen: dict[tuple[int, bytes], tuple[int, int, int]] = {}

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
        for buffer in launch.buffers:
            if buffer.phase == "before":
                self._snapshot(seq, buffer.param_index, "before", buffer.base, buffer.tobytes())
        for buffer in launch.buffers:
            if buffer.phase == "after":
                data = after[buffer.param_index] if after is not None else buffer.tobytes()
                self._snapshot(seq, buffer.param_index, "after", buffer.base, data)
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

    def _snapshot(self, seq: int, param_index: int, phase: str, base: int, data: bytes) -> None:
        key = (len(data), hashlib.blake2b(data, digest_size=16).digest())
        same = self._seen.get(key)
        if same is not None:
            head = struct.pack("<QIIQQ", seq, param_index, _PHASES[phase], base, len(data))
            self._record(REC_SAME, head + struct.pack("<QII", *same))
            return
        self._record(
            REC_BUFFER, struct.pack("<QIIQQ", seq, param_index, _PHASES[phase], base, len(data)) + data
        )
        self._seen[key] = (seq, param_index, _PHASES[phase])

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

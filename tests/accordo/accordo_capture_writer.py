"""Writes capture files exactly as profiler/native/FORMAT.md specifies (an independent implementation of the
format for the reader's tests; it deliberately does not share code with accordo.capture)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

NO_LAUNCH = 0xFFFFFFFFFFFFFFFF


@dataclass
class P:
    """A parameter: kind 0 with raw bytes, kind 1 with (pointer, base, size), kind 2 with nothing."""

    index: int
    offset: int
    size: int
    kind: int
    raw: bytes = b""
    pointer: tuple[int, int, int] = (0, 0, 0)


def file_header(version: int = 1) -> bytes:
    return b"ACCORDO1" + struct.pack("<II", version, 0)


def record(rtype: int, payload: bytes) -> bytes:
    return struct.pack("<IIQ", rtype, 0, len(payload)) + payload


def launch(launch_index: int, seq: int, name: str, demangled: str, params: list[P]) -> bytes:
    out = struct.pack("<QQ", launch_index, seq)
    for text in (name, demangled):
        data = text.encode()
        out += struct.pack("<I", len(data)) + data
    out += struct.pack("<I", len(params))
    for p in params:
        out += struct.pack("<IIII", p.index, p.offset, p.size, p.kind)
        if p.kind == 0:
            out += p.raw
        elif p.kind == 1:
            out += struct.pack("<QQQ", *p.pointer)
    return record(1, out)


def buffer(seq: int, param_index: int, phase: int, base: int, data: bytes) -> bytes:
    return record(2, struct.pack("<QIIQQ", seq, param_index, phase, base, len(data)) + data)


def same(seq: int, param_index: int, phase: int, base: int, nbytes: int, of: tuple[int, int, int]) -> bytes:
    """A SAME record: this snapshot's bytes equal those of the earlier record ``of`` = (seq, param, phase)."""
    return record(6, struct.pack("<QIIQQQII", seq, param_index, phase, base, nbytes, *of))


def time(seq: int, start: int, end: int) -> bytes:
    return record(3, struct.pack("<QQQ", seq, start, end))


def error(seq: int, message: str) -> bytes:
    data = message.encode()
    return record(4, struct.pack("<QI", seq, len(data)) + data)


def shape(
    seq: int,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    *,
    dynamic_shared: int = 0,
    flags: int = 0,
    stream: int = 0,
    persisting_l2: int = 0xFFFFFFFFFFFFFFFF,
    module: int = 0xFFFFFFFFFFFFFFFF,
) -> bytes:
    """A SHAPE record (type 7): the launch's dimensions, stream and module (~0: unknown / none)."""
    payload = struct.pack("<Q3I3III", seq, *grid, *block, dynamic_shared, flags)
    return record(7, payload + struct.pack("<QQQ", stream, persisting_l2, module))


def module(index: int, names: list[str], image: bytes) -> bytes:
    """A MODULE record (type 8): a cubin and the matching kernels it holds."""
    out = struct.pack("<QI", index, len(names))
    for name in names:
        out += struct.pack("<I", len(name.encode())) + name.encode()
    return record(8, out + struct.pack("<Q", len(image)) + image)


def end() -> bytes:
    return record(5, b"")


@dataclass
class ScaleCapture:
    """A capture of `scale(const float* in, float* out, int n)` launched `launches` times, in the order the
    native library writes it (TIME records at the end). With ``dedupe``, every snapshot equal to the
    previous one of its allocation is a SAME record naming that previous record (so SAME records chain)."""

    n: int = 10
    launches: int = 2
    dedupe: bool = False
    parts: list[bytes] = field(default_factory=list)

    def build(self, *, with_end: bool = True) -> bytes:
        import numpy as np

        base_in, base_out = 0x7F0000000000, 0x7F0000001000
        x = np.arange(self.n, dtype=np.float32) * 0.5
        out = np.zeros(self.n, dtype=np.float32)
        blob = file_header()
        last: dict[int, tuple[tuple[int, int, int], bytes]] = {}  # base -> (record, bytes) written last

        def snapshot(seq: int, param: int, phase: int, base: int, data: bytes) -> bytes:
            previous = last.get(base)
            last[base] = ((seq, param, phase), data)
            if self.dedupe and previous is not None and previous[1] == data:
                return same(seq, param, phase, base, len(data), previous[0])
            return buffer(seq, param, phase, base, data)

        for i in range(self.launches):
            params = [
                P(0, 0, 8, 1, pointer=(base_in, base_in, 4 * self.n)),
                P(1, 8, 8, 1, pointer=(base_out, base_out, 4 * self.n)),
                P(2, 16, 4, 0, raw=struct.pack("<i", self.n)),
            ]
            blob += launch(i, i, "_Z5scalePKfPfi", "scale(float const*, float*, int)", params)
            blob += snapshot(i, 0, 0, base_in, x.tobytes()) + snapshot(i, 1, 0, base_out, out.tobytes())
            out = 2 * x + 1
            blob += snapshot(i, 0, 1, base_in, x.tobytes()) + snapshot(i, 1, 1, base_out, out.tobytes())
        for i in range(self.launches):
            blob += time(i, 1000 * i, 1000 * i + 250)
        if with_end:
            blob += end()
        return blob

"""Buffer capture through the native profiler's capture mode: run an application, snapshot the device
buffers of every launch of the kernels matching a regex before and after the kernel, and read the capture
file.

The file format is specified in profiler/native/FORMAT.md. Buffers are not copied when the file is read:
``Buffer.data`` is a numpy uint8 view over a read-only memory map of the file. A snapshot stored as a SAME
record (its bytes equal an earlier snapshot's) is a ``Buffer`` over that earlier snapshot's bytes.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from intelliperf.errors import KernelNotFoundError, ProfileError, tail
from profiler.trace import AppRun, injection_env, profiler_messages, run_app

__all__ = [
    "JUDGED_RUN_VARS",
    "Buffer",
    "Capture",
    "CaptureError",
    "CaptureRun",
    "Launch",
    "LaunchShape",
    "Module",
    "Param",
    "equal_bytes",
    "judged_env",
    "read_capture",
    "run_capture",
    "write_restore",
]

MAGIC = b"ACCORDO1"
EQUAL_CHUNK = 4 << 20  # equal_bytes compares this many bytes at a time (cache-sized; no large temporaries)
VERSION = 1
NO_LAUNCH = 0xFFFFFFFFFFFFFFFF  # the all-ones u64: an ERROR record about no one launch

REC_LAUNCH, REC_BUFFER, REC_TIME, REC_ERROR, REC_END, REC_SAME, REC_SHAPE, REC_MODULE = 1, 2, 3, 4, 5, 6, 7, 8
UNKNOWN = NO_LAUNCH  # a SHAPE field the driver did not say (persisting_l2), or no module seen
PARAM_KINDS = {0: "scalar", 1: "pointer", 2: "unavailable"}
PHASES = {0: "before", 1: "after"}

_FILE_HEADER = struct.Struct("<8sII")
_RECORD_HEADER = struct.Struct("<IIQ")


@dataclass(frozen=True)
class Param:
    index: int
    offset: int
    size: int
    kind: Literal["scalar", "pointer", "unavailable"]
    raw: bytes  # scalar: its bytes; pointer: the 8 bytes of the pointer; unavailable: b""
    pointer: int | None = None
    alloc_base: int | None = None
    alloc_size: int | None = None

    def scalar(self, dtype: np.typing.DTypeLike) -> np.generic:
        """The raw bytes read as one value of ``dtype`` (e.g. np.int32 for ``int n``)."""
        dt = np.dtype(dtype).newbyteorder("<")
        if dt.itemsize != len(self.raw):
            raise ValueError(f"parameter {self.index} has {len(self.raw)} bytes, {dt} needs {dt.itemsize}")
        return np.frombuffer(self.raw, dtype=dt)[0]

    @property
    def alloc_offset(self) -> int | None:
        """Byte offset of the pointer inside its allocation."""
        if self.pointer is None or self.alloc_base is None:
            return None
        return self.pointer - self.alloc_base


@dataclass(frozen=True)
class Buffer:
    """A snapshot of one allocation (or its capped window, from ``base`` on) before or after a kernel.

    ``file_offset`` is where its bytes are in the file: snapshots written as SAME records share the bytes
    (and the offset) of the snapshot they repeat."""

    seq: int
    param_index: int
    phase: Literal["before", "after"]
    base: int
    nbytes: int
    file_offset: int
    _map: mmap.mmap = field(repr=False, compare=False)

    @property
    def source_id(self) -> int:
        """Which capture file's memory map holds the bytes (with ``file_offset``: which bytes)."""
        return id(self._map)

    @property
    def file_bytes(self) -> int:
        """The size of the capture file that holds the bytes."""
        return len(self._map)

    @property
    def data(self) -> np.ndarray:
        """The bytes as a read-only uint8 array backed by the file (no copy)."""
        return np.frombuffer(self._map, dtype=np.uint8, count=self.nbytes, offset=self.file_offset)

    @property
    def raw(self) -> memoryview:
        """The bytes as a read-only memoryview of the file (no copy), for writing them elsewhere."""
        return memoryview(self._map)[self.file_offset : self.file_offset + self.nbytes]

    def same_as(self, other: Buffer) -> bool:
        """Whether both snapshots hold the same bytes (free when one repeats the other in the file)."""
        if self.nbytes != other.nbytes:
            return False
        if self._map is other._map and self.file_offset == other.file_offset:
            return True
        return equal_bytes(self.data, other.data)

    def view(self, dtype: np.typing.DTypeLike, *, byte_offset: int = 0, count: int = -1) -> np.ndarray:
        """The bytes from ``byte_offset`` on, read as ``dtype`` (no copy)."""
        dt = np.dtype(dtype)
        available = (self.nbytes - byte_offset) // dt.itemsize
        if byte_offset < 0 or available < 0 or count > available:
            raise ValueError(f"{count} x {dt} at byte {byte_offset} exceed the {self.nbytes}-byte buffer")
        n = available if count < 0 else count
        return np.frombuffer(self._map, dtype=dt, count=n, offset=self.file_offset + byte_offset)

    def tobytes(self) -> bytes:
        return bytes(self._map[self.file_offset : self.file_offset + self.nbytes])


@dataclass(frozen=True)
class CaptureError:
    seq: int | None  # the launch it concerns; None for the whole capture
    message: str


@dataclass(frozen=True)
class LaunchShape:
    """How a launch was made (SHAPE record): what a replay needs besides the buffers and the module."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_shared: int  # bytes
    stream: int  # the stream handle as the program passed it (0: the default stream)
    per_thread: bool  # a _ptsz launch
    graph_capture: bool  # the stream was being captured into a CUDA graph
    persisting_l2: int | None  # the context's persisting-L2 limit at the launch, bytes (None: not known)
    module: int | None  # the MODULE record holding the kernel (None: none was seen)


@dataclass(frozen=True)
class Module:
    """A loaded cubin that holds the captured kernels ``names`` (MODULE record)."""

    index: int
    names: tuple[str, ...]
    nbytes: int
    file_offset: int
    _map: mmap.mmap = field(repr=False, compare=False)

    @property
    def image(self) -> bytes:
        return bytes(self._map[self.file_offset : self.file_offset + self.nbytes])


@dataclass(frozen=True)
class Launch:
    seq: int  # 0, 1, 2, ... over the file
    launch_index: int  # 0, 1, 2, ... per kernel name
    name: str
    demangled: str
    params: tuple[Param, ...]
    buffers: tuple[Buffer, ...]
    errors: tuple[str, ...]
    start_ns: int | None
    end_ns: int | None
    shape: LaunchShape | None = None  # None: a capture from before SHAPE records

    @property
    def duration_ns(self) -> int | None:
        if self.start_ns is None or self.end_ns is None:
            return None
        return self.end_ns - self.start_ns

    @property
    def complete(self) -> bool:
        """Nothing failed and every allocation a pointer parameter points into has both snapshots."""
        owners: dict[int | None, int] = {}
        for p in self.params:
            if p.kind == "pointer":
                owners.setdefault(p.alloc_base, p.index)
        have = {(b.param_index, b.phase) for b in self.buffers}
        return not self.errors and all(
            (index, phase) in have for index in owners.values() for phase in ("before", "after")
        )

    def buffer(self, param_index: int, phase: Literal["before", "after"]) -> Buffer | None:
        """The snapshot of the allocation parameter ``param_index`` points into (deduplicated snapshots
        are found through the parameter that shares the allocation)."""
        for b in self.buffers:
            if b.param_index == param_index and b.phase == phase:
                return b
        param = next((p for p in self.params if p.index == param_index), None)
        if param is None or param.kind != "pointer":
            return None
        owner = next(
            (p.index for p in self.params if p.kind == "pointer" and p.alloc_base == param.alloc_base),
            None,
        )
        if owner is None or owner == param_index:
            return None
        return next((b for b in self.buffers if b.param_index == owner and b.phase == phase), None)


@dataclass(frozen=True)
class Capture:
    path: Path
    complete: bool  # the END record was seen
    truncated: bool  # the file ends inside a record (the process died while writing)
    launches: tuple[Launch, ...]
    errors: tuple[CaptureError, ...]  # every ERROR record, in file order
    modules: tuple[Module, ...] = ()

    def module_of(self, launch: Launch) -> Module | None:
        """The cubin ``launch``'s kernel ran from, if the capture kept it."""
        if launch.shape is None or launch.shape.module is None:
            return None
        return next((m for m in self.modules if m.index == launch.shape.module), None)

    @property
    def file_bytes(self) -> int:
        """The size of the capture files that hold the snapshots."""
        return sum({b.source_id: b.file_bytes for x in self.launches for b in x.buffers}.values())

    def for_kernel(self, name: str) -> tuple[Launch, ...]:
        """The launches whose mangled or demangled name equals ``name``."""
        return tuple(x for x in self.launches if name in (x.name, x.demangled))


# ----------------------------------------------------------------------------------------------------------
# Reading


class _Payload:
    """Bounds-checked little-endian reads from one record's payload."""

    def __init__(self, data: mmap.mmap, start: int, end: int, what: str) -> None:
        self.data, self.pos, self.end, self.what = data, start, end, what

    def take(self, fmt: str) -> tuple[int, ...]:
        s = struct.calcsize("<" + fmt)
        if self.pos + s > self.end:
            raise ProfileError(f"corrupt capture file: {self.what} is shorter than its fields")
        values = struct.unpack_from("<" + fmt, self.data, self.pos)
        self.pos += s
        return values

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise ProfileError(f"corrupt capture file: {self.what} is shorter than its fields")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def text(self) -> str:
        (n,) = self.take("I")
        return self.raw(n).decode("utf-8", errors="replace")


@dataclass
class _LaunchBuilder:
    seq: int
    launch_index: int
    name: str
    demangled: str
    params: tuple[Param, ...]
    buffers: list[Buffer] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    start_ns: int | None = None
    end_ns: int | None = None
    shape: LaunchShape | None = None

    def build(self) -> Launch:
        return Launch(
            seq=self.seq,
            launch_index=self.launch_index,
            name=self.name,
            demangled=self.demangled,
            params=self.params,
            buffers=tuple(self.buffers),
            errors=tuple(self.errors),
            start_ns=self.start_ns,
            end_ns=self.end_ns,
            shape=self.shape,
        )


def _parse_launch(p: _Payload) -> _LaunchBuilder:
    launch_index, seq = p.take("QQ")
    name = p.text()
    demangled = p.text()
    (n_params,) = p.take("I")
    params = []
    for _ in range(n_params):
        index, offset, size, kind = p.take("IIII")
        if kind not in PARAM_KINDS:
            raise ProfileError(f"corrupt capture file: {p.what} has parameter kind {kind}")
        if kind == 0:
            params.append(Param(index, offset, size, "scalar", p.raw(size)))
        elif kind == 1:
            pointer, base, alloc_size = p.take("QQQ")
            params.append(
                Param(index, offset, size, "pointer", struct.pack("<Q", pointer), pointer, base, alloc_size)
            )
        else:
            params.append(Param(index, offset, size, "unavailable", b""))
    if p.pos != p.end:
        raise ProfileError(f"corrupt capture file: {p.what} has {p.end - p.pos} unexpected trailing bytes")
    return _LaunchBuilder(seq, launch_index, name, demangled, tuple(params))


def _parse_shape(p: _Payload) -> tuple[int, LaunchShape]:
    seq, gx, gy, gz, bx, by, bz, shared, flags, stream, persisting, module = p.take("QIIIIIIIIQQQ")
    if p.pos != p.end:
        raise ProfileError(f"corrupt capture file: {p.what} has {p.end - p.pos} unexpected trailing bytes")
    return seq, LaunchShape(
        grid=(gx, gy, gz),
        block=(bx, by, bz),
        dynamic_shared=shared,
        stream=stream,
        per_thread=bool(flags & 2),
        graph_capture=bool(flags & 1),
        persisting_l2=None if persisting == UNKNOWN else persisting,
        module=None if module == UNKNOWN else module,
    )


def _parse_module(p: _Payload, data: mmap.mmap) -> Module:
    index, n_names = p.take("QI")
    names = tuple(p.text() for _ in range(n_names))
    (nbytes,) = p.take("Q")
    if nbytes != p.end - p.pos:
        raise ProfileError(f"corrupt capture file: {p.what} says {nbytes} image bytes, holds {p.end - p.pos}")
    return Module(index, names, nbytes, p.pos, data)


def read_capture(path: str | os.PathLike[str]) -> Capture:
    """Parse a capture file. Buffers stay in the file (memory-mapped).

    A file that ends early (the process crashed) is returned with ``complete=False`` and, if it stops
    inside a record, ``truncated=True``. Raises ProfileError for a missing file, a foreign or corrupt
    file, or another format version.
    """
    path = Path(path)
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < _FILE_HEADER.size:
                raise ProfileError(f"{path} is not an Accordo capture file (only {size} bytes)")
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise ProfileError(f"the capture file {path} does not exist") from None
    except OSError as exc:
        raise ProfileError(f"cannot read the capture file {path}: {exc}") from exc

    magic, version, _ = _FILE_HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise ProfileError(f"{path} is not an Accordo capture file (bad magic {magic!r})")
    if version != VERSION:
        raise ProfileError(f"{path} is a capture of format version {version}; this reader knows {VERSION}")

    launches: dict[int, _LaunchBuilder] = {}
    snapshots: dict[tuple[int, int, int], Buffer] = {}  # (seq, param_index, phase) -> its bytes
    errors: list[CaptureError] = []
    modules: list[Module] = []
    complete = truncated = False
    pos = _FILE_HEADER.size
    while pos < size:
        if pos + _RECORD_HEADER.size > size:
            truncated = True
            break
        rtype, _, length = _RECORD_HEADER.unpack_from(data, pos)
        start = pos + _RECORD_HEADER.size
        end = start + length
        if end > size:
            truncated = True
            break
        what = f"record at byte {pos} (type {rtype})"
        p = _Payload(data, start, end, what)
        if rtype == REC_LAUNCH:
            launch = _parse_launch(p)
            if launch.seq in launches:
                raise ProfileError(f"corrupt capture file: {what} repeats launch {launch.seq}")
            launches[launch.seq] = launch
        elif rtype == REC_BUFFER:
            seq, param_index, phase, base, nbytes = p.take("QIIQQ")
            if phase not in PHASES or seq not in launches or nbytes != end - p.pos:
                raise ProfileError(f"corrupt capture file: {what} is inconsistent")
            buf = Buffer(seq, param_index, PHASES[phase], base, nbytes, p.pos, data)
            launches[seq].buffers.append(buf)
            snapshots[(seq, param_index, phase)] = buf
        elif rtype == REC_SAME:
            seq, param_index, phase, base, nbytes, same_seq, same_index, same_phase = p.take("QIIQQQII")
            if p.pos != end:
                raise ProfileError(
                    f"corrupt capture file: {what} has {end - p.pos} unexpected trailing bytes"
                )
            if phase not in PHASES or seq not in launches:
                raise ProfileError(f"corrupt capture file: {what} is inconsistent")
            same = snapshots.get((same_seq, same_index, same_phase))
            if same is None:
                raise ProfileError(
                    f"corrupt capture file: {what} repeats launch {same_seq} parameter {same_index} "
                    f"phase {same_phase}, which no earlier record holds"
                )
            if same.nbytes != nbytes:
                raise ProfileError(
                    f"corrupt capture file: {what} has {nbytes} bytes, the record it repeats {same.nbytes}"
                )
            buf = Buffer(seq, param_index, PHASES[phase], base, nbytes, same.file_offset, data)
            launches[seq].buffers.append(buf)
            snapshots[(seq, param_index, phase)] = buf
        elif rtype == REC_TIME:
            seq, start_ns, end_ns = p.take("QQQ")
            if seq in launches:
                launches[seq].start_ns, launches[seq].end_ns = start_ns, end_ns
        elif rtype == REC_SHAPE:
            seq, shape = _parse_shape(p)
            if seq not in launches:
                raise ProfileError(
                    f"corrupt capture file: {what} names launch {seq}, which no LAUNCH precedes"
                )
            launches[seq].shape = shape
        elif rtype == REC_MODULE:
            modules.append(_parse_module(p, data))
        elif rtype == REC_ERROR:
            (seq,) = p.take("Q")
            message = p.text()
            if seq == NO_LAUNCH:
                errors.append(CaptureError(None, message))
            else:
                errors.append(CaptureError(seq, message))
                if seq in launches:
                    launches[seq].errors.append(message)
        elif rtype == REC_END:
            complete = True
            break
        # unknown record types are skipped: later versions may add some
        pos = end
    ordered = tuple(launches[seq].build() for seq in sorted(launches))
    return Capture(
        path=path,
        complete=complete,
        truncated=truncated,
        launches=ordered,
        errors=tuple(errors),
        modules=tuple(modules),
    )


def equal_bytes(a: np.ndarray | bytes | memoryview, b: np.ndarray | bytes | memoryview) -> bool:
    """Whether two byte strings are equal, compared ``EQUAL_CHUNK`` bytes at a time: a snapshot of a
    large buffer costs a pass over memory, not a boolean array of its size (np.array_equal's)."""
    x, y = np.frombuffer(a, dtype=np.uint8), np.frombuffer(b, dtype=np.uint8)  # contiguous: as bytes
    if x.nbytes != y.nbytes:
        return False
    return all(
        np.array_equal(x[start : start + EQUAL_CHUNK], y[start : start + EQUAL_CHUNK])
        for start in range(0, x.nbytes, EQUAL_CHUNK)
    )


# ----------------------------------------------------------------------------------------------------------
# Restoring


def write_restore(
    capture: Capture,
    folder: str | os.PathLike[str],
    replace: Callable[[Launch, Buffer], bytes | None] | None = None,
) -> Path:
    """The inputs of every launch of ``capture``, as capture mode's ``restore`` setting reads them: one file
    per launch and parameter, ``<seq>-<param>.bin``, holding the snapshot taken before the kernel, or what
    ``replace`` returns for it (None: the snapshot). A snapshot that repeats an earlier one (a SAME record)
    and is not replaced, or a replacement ``replace`` returned before (the same object), is a hard link to
    that one's file, so a loop of launches on unchanged buffers costs its bytes once. Returns the folder
    (created; must be empty)."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        raise ValueError(f"{out} is not empty")
    written: dict[tuple[int, int], Path] = {}
    # id() of each replacement written -> (the object, kept alive so the id is not reused; its file)
    replacements: dict[int, tuple[bytes, Path]] = {}
    for launch in capture.launches:
        for buffer in launch.buffers:
            if buffer.phase != "before":
                continue
            path = out / f"{launch.seq}-{buffer.param_index}.bin"
            replaced = replace(launch, buffer) if replace is not None else None
            if replaced is not None:
                earlier = replacements.get(id(replaced))
                if earlier is not None:
                    os.link(earlier[1], path)
                    continue
                path.write_bytes(replaced)
                replacements[id(replaced)] = (replaced, path)
                continue
            same = written.get((buffer.source_id, buffer.file_offset))
            if same is not None:
                os.link(same, path)
                continue
            with path.open("wb") as sink:
                sink.write(buffer.raw)
            written[(buffer.source_id, buffer.file_offset)] = path
    return out


# ----------------------------------------------------------------------------------------------------------
# Running


@dataclass(frozen=True)
class CaptureRun:
    status: Literal["ok", "crash", "timeout"]
    returncode: int | None  # None on timeout; negative: killed by that signal
    signal: str | None  # e.g. "SIGSEGV"
    message: str  # how the process ended, in words
    stdout: str
    stderr: str
    stderr_tail: str
    wall_s: float
    captures: tuple[Capture, ...]  # one per CUDA process, by path
    capture: Capture | None  # the first capture holding launches (else the first one, else None)


def _pick(captures: Sequence[Capture]) -> Capture | None:
    for c in captures:
        if c.launches:
            return c
    return captures[0] if captures else None


JUDGED_RUN_VARS = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
"""What every judged run, captured or timed (accordo.timing.run_timed), adds to the program's environment:
one environment, so the program cannot tell a timed run from a captured one. PyTorch's caching allocator
packs tensors into shared blocks; with it off every tensor is its own allocation, so a snapshot holds one
tensor and a candidate's extra tensors shift no one's offset."""


def judged_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` with JUDGED_RUN_VARS set (they win over the caller's)."""
    return {**(env or {}), **JUDGED_RUN_VARS}


def run_capture(
    cmd: Sequence[str],
    *,
    kernel_regex: str,
    cwd: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
    timeout_s: float,
    max_bytes: int | None = None,
    budget_bytes: int | None = None,
    library: str | os.PathLike[str] | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    restore: str | os.PathLike[str] | None = None,
    settings: Mapping[str, str] | None = None,
) -> CaptureRun:
    """Run ``cmd`` with buffer capture for the kernels whose mangled or demangled name matches
    ``kernel_regex`` (ECMAScript syntax, searched, not anchored). ``restore``: a folder ``write_restore``
    made; each launch then runs on the inputs it holds for that launch. ``max_bytes`` caps each snapshot
    (the ``max_bytes`` setting); ``budget_bytes`` bounds the capture's snapshots (``capture_budget``): a
    program that makes the kernel read more raises CaptureBudgetError. ``settings``: more profiler
    settings (``{"dedup": "0"}``: profiler/native/config.h).

    A crash or timeout is returned (``status``), not raised. Raises AppError when the program cannot be
    started, ProfileError when it exited cleanly but wrote no capture (or the capture reports a setup
    error), and KernelNotFoundError when it exited cleanly and no launch matched. ``output_dir`` keeps the
    capture files there; by default they live in a temporary directory that is removed once read (the
    returned buffers stay readable through their memory maps).
    """
    if not kernel_regex:
        raise ValueError("kernel_regex must not be empty")
    if max_bytes is not None and max_bytes <= 0:
        raise ValueError("max_bytes must be positive")
    if budget_bytes is not None and budget_bytes <= 0:
        raise ValueError("budget_bytes must be positive")
    if library is None:
        from profiler.build import native_library

        library = native_library()
    run_vars = judged_env(env)
    extra = {"kernel": kernel_regex, **(settings or {})}
    if max_bytes is not None:
        extra["max_bytes"] = str(int(max_bytes))
    if budget_bytes is not None:
        extra["capture_budget"] = str(int(budget_bytes))
    if restore is not None:
        extra["restore"] = str(Path(restore).resolve())

    with tempfile.TemporaryDirectory(prefix="intelliperf-run-") as tmp:
        out_dir = Path(output_dir) if output_dir is not None else Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        if any(out_dir.glob("capture-*.bin")):
            raise ValueError(f"{out_dir} already holds capture-*.bin files; give an empty output_dir")
        pattern = "capture-%p.bin"
        run_env = injection_env(run_vars, Path(library), Path(tmp), "capture", out_dir / pattern, **extra)
        app = run_app(cmd, cwd=cwd, env=run_env, timeout_s=timeout_s)
        captures = tuple(read_capture(p) for p in sorted(out_dir.glob("capture-*.bin")))
    return _judge(app, captures, kernel_regex, timeout_s)


BUDGET_ERROR = "capture budget:"  # how profiler/native/capture.cpp starts the ERROR of a launch over it


class CaptureBudgetError(ProfileError):
    """The kernel's launches read more than the capture budget allows."""


def over_budget(captures: Sequence[Capture]) -> CaptureBudgetError | None:
    """The error to raise when a launch of ``captures`` went uncaptured for the budget, else None."""
    for capture in captures:
        for error in capture.errors:
            if error.seq is not None and error.message.startswith(BUDGET_ERROR):
                launch = next((x for x in capture.launches if x.seq == error.seq), None)
                which = f"launch {launch.launch_index + 1} of {launch.demangled}" if launch else "a launch"
                return CaptureBudgetError(
                    f"{which} was not captured: {error.message.removeprefix(BUDGET_ERROR).strip()}",
                    hint="the kernel reads more than the capture budget over the run: run the program with "
                    "fewer launches or smaller inputs for validation, or raise the budget "
                    "(INTELLIPERF_CAPTURE_BUDGET_BYTES)",
                )
    return None


def _judge(app: AppRun, captures: tuple[Capture, ...], kernel_regex: str, timeout_s: float) -> CaptureRun:
    status: Literal["ok", "crash", "timeout"]
    if app.timed_out:
        status = "timeout"
    elif app.returncode != 0:
        status = "crash"
    else:
        status = "ok"
    capture = _pick(captures)
    if status == "ok":
        notes = profiler_messages(app.stderr)
        if capture is None:
            raise ProfileError(
                "no capture was written: CUDA never loaded the capture library (the program did not "
                "initialize CUDA, or no NVIDIA driver is present)",
                log_tail=notes or None,
            )
        setup_errors = [e.message for c in captures for e in c.errors if e.seq is None]
        if not capture.launches and setup_errors:
            raise ProfileError("the capture failed: " + "; ".join(setup_errors), log_tail=notes or None)
        over = over_budget(captures)
        if over is not None:
            raise over
        if not capture.launches:
            raise KernelNotFoundError(
                f"no launched kernel matched {kernel_regex!r}",
                hint="the regex is searched in the mangled and the demangled names; "
                "a trace lists the kernels",
            )
    return CaptureRun(
        status=status,
        returncode=app.returncode,
        signal=app.signal_name,
        message=app.describe(timeout_s) if status != "ok" else "exited with code 0",
        stdout=app.stdout,
        stderr=app.stderr,
        stderr_tail=tail(app.stderr),
        wall_s=app.wall_s,
        captures=captures,
        capture=capture,
    )

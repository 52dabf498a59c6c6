"""Standalone CUDA-event timing of one captured kernel launch, independent of IntelliPerf's CUPTI tracer.

The benchmark uses it to check that the speedup IntelliPerf measures with CUPTI (Accordo's trace mode)
matches a second, unrelated measurement: the kernel is compiled to a cubin by nvcc, loaded through the
CUDA driver API (``ctypes`` over ``libcuda.so.1``; standard library + numpy only), fed the inputs that
Accordo's capture mode recorded (``accordo.capture.Launch``) and timed with CUDA events::

    with EventHarness() as h:
        ref = h.prepare(h.load(compile_cubin(src, tmp / "ref.cubin"), name), launch, grid, block, smem)
        cand = h.prepare(h.load(compile_cubin(fixed, tmp / "cand.cubin"), name), launch, grid, block, smem)
        print(h.speedup(ref, cand).speedup)

Every driver call is checked: a failure raises RuntimeError naming the call and the CUresult
(``cuGetErrorName``).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from accordo.capture import Launch
from accordo.cubin_variables import device_variables
from accordo.cuda_driver import SPIN_KERNEL, SPIN_PTX

ROOT = Path(__file__).resolve().parents[1]

__all__ = [
    "EventHarness",
    "HarnessSpeedup",
    "LoadedKernel",
    "ModuleVariable",
    "PreparedLaunch",
    "compile_cubin",
    "dynamic_smem",
    "param_blob",
]

CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEFAULT_DYNAMIC_SMEM_LIMIT = 48 * 1024  # above this a kernel must opt in (MAX_DYNAMIC_SHARED_SIZE_BYTES)

_POINTER = struct.Struct("<Q")


# ----------------------------------------------------------------------------------------------------------
# Pure helpers (no GPU)


NVCC_FLAGS = ("-O3", "-lineinfo", "-std=c++17", "--extended-lambda")
"""What every compiled example takes, and ``--extended-lambda`` for those that launch a template kernel
with a ``__device__`` lambda (examples/tile_sums); it changes no other code."""


def compile_cubin(source: Path, out: Path, *, arch: str = "sm_90", nvcc: str = "nvcc") -> Path:
    """Compile ``source`` to the cubin ``out`` (NVCC_FLAGS). Raises RuntimeError with the tail of nvcc's
    output when nvcc is missing or fails."""
    source, out = Path(source), Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [nvcc, "-cubin", *NVCC_FLAGS, f"-arch={arch}", "-o", str(out), str(source)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600)
    except FileNotFoundError:
        raise RuntimeError(f"nvcc not found: {nvcc!r}") from None
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot run {nvcc!r}: {exc}") from exc
    if proc.returncode != 0:
        output = (proc.stderr or proc.stdout).strip()
        raise RuntimeError(
            f"nvcc failed with exit code {proc.returncode} compiling {source}:\n{output[-4000:]}"
        )
    if not out.is_file():
        raise RuntimeError(f"nvcc exited with code 0 but wrote no cubin at {out}")
    return out


def param_blob(launch: Launch, new_bases: Mapping[int, int]) -> list[bytes]:
    """The kernel parameters of ``launch`` as bytes, in parameter order, with every pointer moved into
    the harness's own allocations.

    ``new_bases`` maps a captured allocation base (``Param.alloc_base``) to the base of its replacement
    allocation; a pointer parameter becomes ``new_bases[alloc_base] + alloc_offset`` (a little-endian
    u64), so a pointer into the middle of an allocation keeps its offset. Scalars keep their raw bytes.
    Raises ValueError for a parameter of kind "unavailable" (the capture could not read it), for a pointer
    whose allocation has no entry in ``new_bases``, and for parameter indices that are not 0..n-1.
    """
    params = sorted(launch.params, key=lambda p: p.index)
    if [p.index for p in params] != list(range(len(params))):
        raise ValueError(
            f"launch {launch.seq} of {launch.name}: parameter indices "
            f"{[p.index for p in params]} are not 0..{len(params) - 1}"
        )
    blobs = []
    for p in params:
        if p.kind == "unavailable":
            raise ValueError(
                f"launch {launch.seq} of {launch.name}: parameter {p.index} is unavailable "
                "(the capture could not read the launch's parameters)"
            )
        if p.kind == "pointer":
            if p.alloc_base is None or p.alloc_offset is None:
                raise ValueError(f"parameter {p.index} is a pointer without an allocation base")
            if p.alloc_base not in new_bases:
                raise ValueError(
                    f"parameter {p.index} points into allocation {p.alloc_base:#x}, which has no replacement"
                )
            blobs.append(_POINTER.pack(new_bases[p.alloc_base] + p.alloc_offset))
        else:
            if len(p.raw) != p.size:
                raise ValueError(f"parameter {p.index} has {len(p.raw)} raw bytes but size {p.size}")
            blobs.append(bytes(p.raw))
    return blobs


def dynamic_smem(smem_total: int, static_smem: int) -> int:
    """The dynamic shared memory of a launch: the tracer's ``smem`` is static + dynamic."""
    dynamic = smem_total - static_smem
    if dynamic < 0:
        raise ValueError(
            f"the launch used {smem_total} bytes of shared memory, less than the kernel's "
            f"{static_smem} bytes of static shared memory (another build of the kernel?)"
        )
    return dynamic


def _allocations(launch: Launch) -> dict[int, tuple[int, int]]:
    """Distinct allocations of the pointer parameters: alloc_base -> (alloc_size, first param index)."""
    out: dict[int, tuple[int, int]] = {}
    for p in sorted(launch.params, key=lambda p: p.index):
        if p.kind != "pointer":
            continue
        if p.alloc_base is None or p.alloc_size is None:
            raise ValueError(f"parameter {p.index} is a pointer without an allocation base and size")
        if p.alloc_base in out and out[p.alloc_base][0] != p.alloc_size:
            raise ValueError(f"allocation {p.alloc_base:#x} has two sizes in launch {launch.seq}")
        out.setdefault(p.alloc_base, (p.alloc_size, p.index))
    return out


# ----------------------------------------------------------------------------------------------------------
# The driver API

_c_u64 = ctypes.c_ulonglong  # CUdeviceptr
_p = ctypes.c_void_p  # CUcontext, CUmodule, CUfunction, CUevent, CUstream
_uint, _int, _size = ctypes.c_uint, ctypes.c_int, ctypes.c_size_t

# call name -> (exported symbols in order of preference, argtypes). Explicit, because a _v2 can change the
# signature (cuCtxSynchronize_v2 takes a context) and the v1 memory calls take 32-bit sizes and pointers.
_SIGNATURES: dict[str, tuple[tuple[str, ...], list[Any]]] = {
    "cuGetErrorName": (("cuGetErrorName",), [_int, ctypes.POINTER(ctypes.c_char_p)]),
    "cuInit": (("cuInit",), [_uint]),
    "cuDeviceGet": (("cuDeviceGet",), [ctypes.POINTER(_int), _int]),
    "cuDevicePrimaryCtxRetain": (("cuDevicePrimaryCtxRetain",), [ctypes.POINTER(_p), _int]),
    "cuDevicePrimaryCtxRelease": (("cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"), [_int]),
    "cuCtxGetCurrent": (("cuCtxGetCurrent",), [ctypes.POINTER(_p)]),
    "cuCtxSetCurrent": (("cuCtxSetCurrent",), [_p]),
    "cuCtxSynchronize": (("cuCtxSynchronize",), []),
    "cuModuleLoad": (("cuModuleLoad",), [ctypes.POINTER(_p), ctypes.c_char_p]),
    "cuModuleUnload": (("cuModuleUnload",), [_p]),
    "cuModuleGetFunction": (("cuModuleGetFunction",), [ctypes.POINTER(_p), _p, ctypes.c_char_p]),
    "cuFuncGetAttribute": (("cuFuncGetAttribute",), [ctypes.POINTER(_int), _int, _p]),
    "cuFuncSetAttribute": (("cuFuncSetAttribute",), [_p, _int, _int]),
    "cuMemAlloc": (("cuMemAlloc_v2",), [ctypes.POINTER(_c_u64), _size]),
    "cuMemFree": (("cuMemFree_v2",), [_c_u64]),
    "cuMemsetD8": (("cuMemsetD8_v2",), [_c_u64, ctypes.c_ubyte, _size]),
    "cuMemcpyHtoD": (("cuMemcpyHtoD_v2",), [_c_u64, _p, _size]),
    "cuMemcpyDtoH": (("cuMemcpyDtoH_v2",), [_p, _c_u64, _size]),
    "cuMemcpyDtoD": (("cuMemcpyDtoD_v2",), [_c_u64, _c_u64, _size]),
    "cuMemcpyDtoDAsync": (("cuMemcpyDtoDAsync_v2",), [_c_u64, _c_u64, _size, _p]),
    "cuModuleGetGlobal": (
        ("cuModuleGetGlobal_v2",),
        [ctypes.POINTER(_c_u64), ctypes.POINTER(_size), _p, ctypes.c_char_p],
    ),
    "cuEventCreate": (("cuEventCreate",), [ctypes.POINTER(_p), _uint]),
    "cuEventRecord": (("cuEventRecord",), [_p, _p]),
    "cuEventSynchronize": (("cuEventSynchronize",), [_p]),
    "cuEventElapsedTime": (
        ("cuEventElapsedTime", "cuEventElapsedTime_v2"),
        [ctypes.POINTER(ctypes.c_float), _p, _p],
    ),
    "cuEventDestroy": (("cuEventDestroy_v2", "cuEventDestroy"), [_p]),
    "cuLaunchKernel": (
        ("cuLaunchKernel",),
        [_p, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _p, ctypes.POINTER(_p), ctypes.POINTER(_p)],
    ),
}
QUEUE_NS_PER_LAUNCH = 60_000  # generous host time to queue one event-launch-event triple from Python


class _Driver:
    """libcuda.so.1 with every call checked: ``driver.call("cuInit", 0)``."""

    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self.lib = ctypes.CDLL(library)
        except OSError as exc:
            raise RuntimeError(f"cannot load the CUDA driver {library}: {exc}") from exc
        self.functions: dict[str, Any] = {}
        for name, (symbols, argtypes) in _SIGNATURES.items():
            fn = next((f for s in symbols if (f := getattr(self.lib, s, None)) is not None), None)
            if fn is None:
                raise RuntimeError(f"the CUDA driver {library} exports none of {', '.join(symbols)}")
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
            self.functions[name] = fn

    def error_name(self, code: int) -> str:
        text = ctypes.c_char_p()
        if self.functions["cuGetErrorName"](code, ctypes.byref(text)) != 0 or text.value is None:
            return f"CUresult {code}"
        return text.value.decode()

    def call(self, name: str, *args: Any) -> None:
        code = self.functions[name](*args)
        if code != 0:
            raise RuntimeError(f"{name} failed: {self.error_name(code)} ({code})")


# ----------------------------------------------------------------------------------------------------------
# The harness


@dataclass(frozen=True)
class ModuleVariable:
    """A ``__device__`` variable a kernel of the module can write, and a device copy of its load-time bytes
    (accordo.cubin_variables)."""

    name: str
    device: int = field(repr=False)
    pristine: int = field(repr=False)
    nbytes: int


@dataclass(frozen=True)
class LoadedKernel:
    name: str  # mangled name
    cubin: Path
    static_smem: int  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    module: int = field(repr=False)
    function: int = field(repr=False)
    variables: tuple[ModuleVariable, ...] = ()


@dataclass
class PreparedLaunch:
    """A kernel with its launch configuration and a private copy of the captured inputs on the device."""

    kernel: LoadedKernel
    launch: Launch = field(repr=False)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem: int
    new_bases: dict[int, int]  # captured allocation base -> harness allocation base
    alloc_sizes: dict[int, int]  # captured allocation base -> size
    params: list[bytes] = field(repr=False)
    # ctypes storage the parameter array points into; kept alive as long as the launch
    _storage: list[Any] = field(repr=False, default_factory=list)
    _args: Any = field(repr=False, default=None)


@dataclass(frozen=True)
class HarnessSpeedup:
    ref_round_medians_ns: list[float]  # median launch time of each round, in round order
    cand_round_medians_ns: list[float]
    ref_median_ns: float  # median over every timed launch of every round
    cand_median_ns: float
    speedup: float  # ref_median_ns / cand_median_ns
    rounds: int
    iterations: int


class EventHarness:
    """Device 0's primary context, for loading cubins, preparing launches and timing them with events.

    Use as a context manager; leaving it frees the allocations, unloads the modules and releases the
    primary context (and makes the previously current context current again).
    """

    def __init__(self, device: int = 0) -> None:
        self.device_index = device
        self._driver: _Driver | None = None
        self._device = -1
        self._context: int | None = None
        self._previous: int | None = None
        self._modules: list[int] = []
        self._allocations: list[int] = []
        self._spin: LoadedKernel | None = None
        self._flush: tuple[int, int] | None = None  # (device pointer, bytes) of the L2-flush scratch

    # -- lifetime --------------------------------------------------------------------------------------

    def __enter__(self) -> EventHarness:
        if self._driver is not None:
            raise RuntimeError("the EventHarness is already entered")
        driver = _Driver()
        driver.call("cuInit", 0)
        device = _int()
        driver.call("cuDeviceGet", ctypes.byref(device), self.device_index)
        previous = _p()
        driver.call("cuCtxGetCurrent", ctypes.byref(previous))
        context = _p()
        driver.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        try:
            driver.call("cuCtxSetCurrent", context)
        except BaseException:
            driver.call("cuDevicePrimaryCtxRelease", device)
            raise
        self._driver, self._device = driver, device.value
        self._context, self._previous = context.value, previous.value
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(raise_errors=exc_type is None)

    def close(self, *, raise_errors: bool = True) -> None:
        """Release everything, trying every step; the first failure is raised at the end (if
        ``raise_errors``: the context manager does not hide an exception already on its way out)."""
        driver = self._driver
        if driver is None:
            return
        errors: list[RuntimeError] = []

        def attempt(name: str, *args: Any) -> None:
            try:
                driver.call(name, *args)
            except RuntimeError as error:
                errors.append(error)

        attempt("cuCtxSynchronize")
        for ptr in reversed(self._allocations):
            attempt("cuMemFree", ptr)
        for module in reversed(self._modules):
            attempt("cuModuleUnload", module)
        attempt("cuCtxSetCurrent", self._previous)
        attempt("cuDevicePrimaryCtxRelease", self._device)
        self._allocations.clear()
        self._modules.clear()
        self._driver, self._context = None, None
        if errors and raise_errors:
            raise errors[0]

    @property
    def driver(self) -> _Driver:
        if self._driver is None:
            raise RuntimeError("the EventHarness is not entered (use it in a `with` block)")
        return self._driver

    # -- loading and preparing -------------------------------------------------------------------------

    def load(self, cubin: Path, kernel: str, *, restore_variables: bool = True) -> LoadedKernel:
        """Load ``cubin`` and find the kernel by its mangled name (as the tracer reports it); keep a copy of
        each writable module variable's load-time bytes, which every launch starts from (``_restore``).
        ``restore_variables=False`` is for the harness's own PTX (the spin kernel): it has no variables, and
        a PTX image has no symbol table to read them from."""
        driver = self.driver
        cubin = Path(cubin)
        module = _p()
        driver.call("cuModuleLoad", ctypes.byref(module), os.fsencode(cubin))
        self._modules.append(module.value or 0)
        function = _p()
        driver.call("cuModuleGetFunction", ctypes.byref(function), module, kernel.encode())
        static = _int()
        driver.call("cuFuncGetAttribute", ctypes.byref(static), CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, function)
        variables = []
        for name in device_variables(cubin.read_bytes()) if restore_variables else ():
            device, nbytes = _c_u64(), _size()
            driver.call(
                "cuModuleGetGlobal", ctypes.byref(device), ctypes.byref(nbytes), module, name.encode()
            )
            pristine = _c_u64()
            driver.call("cuMemAlloc", ctypes.byref(pristine), max(nbytes.value, 1))
            self._allocations.append(pristine.value)
            driver.call("cuMemcpyDtoD", pristine.value, device.value, nbytes.value)
            variables.append(ModuleVariable(name, device.value, pristine.value, nbytes.value))
        return LoadedKernel(
            name=kernel,
            cubin=cubin,
            static_smem=static.value,
            module=module.value or 0,
            function=function.value or 0,
            variables=tuple(variables),
        )

    def prepare(
        self,
        kernel: LoadedKernel,
        launch: Launch,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        smem_total: int,
    ) -> PreparedLaunch:
        """Copy the launch's inputs to the device and build its parameter array.

        One allocation is made per distinct allocation the captured pointers point into, zero-filled,
        then filled with the ``before`` snapshot (a capped snapshot covers only its window, from
        ``buffer.base`` on; the rest stays zero). ``smem_total`` is the tracer's ``smem`` (static +
        dynamic). Raises ValueError when a parameter is unavailable or an allocation has no ``before``
        snapshot.
        """
        driver = self.driver
        allocations = _allocations(launch)
        param_blob(launch, {base: base for base in allocations})  # validate before allocating anything
        snapshots = {}
        for base, (size, index) in allocations.items():
            buffer = launch.buffer(index, "before")
            if buffer is None:
                raise ValueError(
                    f"launch {launch.seq} of {launch.name} has no 'before' snapshot of allocation "
                    f"{base:#x} (parameter {index})"
                )
            if buffer.base < base or buffer.base + buffer.nbytes > base + size:
                raise ValueError(
                    f"the snapshot [{buffer.base:#x}, +{buffer.nbytes}) of parameter {index} lies outside "
                    f"its allocation [{base:#x}, +{size})"
                )
            snapshots[base] = buffer
        dynamic = dynamic_smem(smem_total, kernel.static_smem)

        new_bases: dict[int, int] = {}
        for base, (size, _) in allocations.items():
            ptr = _c_u64()
            driver.call("cuMemAlloc", ctypes.byref(ptr), max(size, 1))
            self._allocations.append(ptr.value)
            new_bases[base] = ptr.value
            driver.call("cuMemsetD8", ptr.value, 0, max(size, 1))
            buffer = snapshots[base]
            if buffer.nbytes:
                host = buffer.data  # read-only view over the capture file's memory map
                driver.call(
                    "cuMemcpyHtoD",
                    ptr.value + (buffer.base - base),
                    host.ctypes.data_as(_p),
                    buffer.nbytes,
                )
        blobs = param_blob(launch, new_bases)
        if dynamic > DEFAULT_DYNAMIC_SMEM_LIMIT:
            driver.call(
                "cuFuncSetAttribute",
                kernel.function,
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                dynamic,
            )
        storage = [ctypes.create_string_buffer(blob, max(len(blob), 1)) for blob in blobs]
        args = (_p * max(len(storage), 1))(*[ctypes.cast(s, _p) for s in storage])
        driver.call("cuCtxSynchronize")
        return PreparedLaunch(
            kernel=kernel,
            launch=launch,
            grid=tuple(grid),  # type: ignore[arg-type]
            block=tuple(block),  # type: ignore[arg-type]
            dynamic_smem=dynamic,
            new_bases=new_bases,
            alloc_sizes={base: size for base, (size, _) in allocations.items()},
            params=blobs,
            _storage=storage,
            _args=args,
        )

    def download(self, prepared: PreparedLaunch, param_index: int) -> bytes:
        """The current contents of the whole allocation that pointer parameter ``param_index`` points
        into (from the allocation's base, like an uncapped ``after`` snapshot)."""
        param = next((p for p in prepared.launch.params if p.index == param_index), None)
        if param is None or param.kind != "pointer" or param.alloc_base is None:
            raise ValueError(f"parameter {param_index} is not a pointer parameter of the launch")
        size = prepared.alloc_sizes[param.alloc_base]
        out = ctypes.create_string_buffer(max(size, 1))
        driver = self.driver
        driver.call("cuCtxSynchronize")
        driver.call("cuMemcpyDtoH", ctypes.cast(out, _p), prepared.new_bases[param.alloc_base], size)
        return out.raw[:size]

    # -- timing ----------------------------------------------------------------------------------------

    def _restore(self, prepared: PreparedLaunch) -> None:
        """Queue copies that put the module's writable variables back to their load-time bytes, as the
        program resets a work-queue counter before each launch: without them, a kernel that drains a
        ``__device__`` queue finds it empty from its second launch on. Nothing for a module without any."""
        for v in prepared.kernel.variables:
            self.driver.call("cuMemcpyDtoDAsync", v.device, v.pristine, v.nbytes, None)

    def _launch(self, prepared: PreparedLaunch) -> None:
        gx, gy, gz = prepared.grid
        bx, by, bz = prepared.block
        self.driver.call(
            "cuLaunchKernel",
            prepared.kernel.function,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            prepared.dynamic_smem,
            None,
            prepared._args,
            None,
        )

    def _flush_l2(self, nbytes: int, salt: int) -> None:
        """Queue a memset of ``nbytes`` (more than the L2) so the next launch starts with a cold cache."""
        if self._flush is None or self._flush[1] < nbytes:
            ptr = _c_u64()
            self.driver.call("cuMemAlloc", ctypes.byref(ptr), nbytes)
            self._allocations.append(ptr.value)
            self._flush = (ptr.value, nbytes)
        self.driver.call("cuMemsetD8", self._flush[0], salt & 0xFF, nbytes)

    def _hold_gpu(self, ns: int) -> None:
        """Queue a kernel that keeps the GPU busy for ``ns`` nanoseconds (accordo.cuda_driver.SPIN_PTX)."""
        if self._spin is None:
            with tempfile.TemporaryDirectory(prefix="event-harness-") as tmp:
                ptx = Path(tmp) / "spin.ptx"
                ptx.write_text(SPIN_PTX)
                self._spin = self.load(ptx, SPIN_KERNEL, restore_variables=False)
        value = ctypes.c_uint64(ns)
        args = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(value), ctypes.c_void_p))
        self.driver.call("cuLaunchKernel", self._spin.function, 1, 1, 1, 1, 1, 1, 0, None, args, None)

    @staticmethod
    def _try(driver: _Driver, name: str, *args: Any) -> RuntimeError | None:
        try:
            driver.call(name, *args)
        except RuntimeError as error:
            return error
        return None

    def time(
        self, prepared: PreparedLaunch, *, iterations: int = 200, warmup: int = 20, flush_l2_bytes: int = 0
    ) -> list[float]:
        """GPU time of each of ``iterations`` launches in ns, after ``warmup`` untimed launches.

        Every launch has its own start/end event pair on the legacy default stream (events created
        before the first launch, read after one synchronization). The module's writable variables are
        restored before each launch (``_restore``, outside the events); the inputs are not: a kernel that
        updates its inputs in place (``y += x``) runs on its own results from the second launch on, which
        matters only when its running time depends on the data.
        """
        if iterations < 1 or warmup < 0:
            raise ValueError("iterations must be at least 1 and warmup not negative")
        driver = self.driver
        events: list[int] = []
        times: list[float] = []
        ok = False
        try:
            for _ in range(2 * iterations):
                event = _p()
                driver.call("cuEventCreate", ctypes.byref(event), 0)
                events.append(event.value or 0)
            for _ in range(warmup):
                self._restore(prepared)
                self._launch(prepared)
            self._hold_gpu(1_000_000 + QUEUE_NS_PER_LAUNCH * iterations)
            for i in range(iterations):
                if flush_l2_bytes:
                    self._flush_l2(flush_l2_bytes, i)
                self._restore(prepared)
                driver.call("cuEventRecord", events[2 * i], None)
                self._launch(prepared)
                driver.call("cuEventRecord", events[2 * i + 1], None)
            driver.call("cuEventSynchronize", events[-1])
            driver.call("cuCtxSynchronize")
            ms = ctypes.c_float()
            for i in range(iterations):
                driver.call("cuEventElapsedTime", ctypes.byref(ms), events[2 * i], events[2 * i + 1])
                times.append(ms.value * 1e6)
            ok = True
        finally:
            destroyed = [self._try(driver, "cuEventDestroy", event) for event in events]
        failure = next((error for error in destroyed if error is not None), None)
        if ok and failure is not None:
            raise failure
        return times

    def time_batched(self, prepared: PreparedLaunch, *, launches: int = 50, rounds: int = 10) -> list[float]:
        """GPU time per launch in ns, once per round: ``launches`` back-to-back launches between one event
        pair, divided by ``launches``. The events' own cost is spread over the batch (what ``time`` pays
        per launch), and the time includes the GPU's gap between consecutive launches, and the copies that
        restore a module's writable variables before each launch (a few us each; none for most modules)."""
        if launches < 1 or rounds < 1:
            raise ValueError("launches and rounds must be at least 1")
        driver = self.driver
        times: list[float] = []
        for _ in range(rounds):
            events = []
            try:
                for _ in range(2):
                    event = _p()
                    driver.call("cuEventCreate", ctypes.byref(event), 0)
                    events.append(event.value or 0)
                self._restore(prepared)
                self._launch(prepared)  # untimed: the previous round's or another kernel's state goes
                self._hold_gpu(1_000_000 + QUEUE_NS_PER_LAUNCH * launches)  # the batch queues up behind it
                driver.call("cuEventRecord", events[0], None)
                for _ in range(launches):
                    self._restore(prepared)
                    self._launch(prepared)
                driver.call("cuEventRecord", events[1], None)
                driver.call("cuEventSynchronize", events[1])
                ms = ctypes.c_float()
                driver.call("cuEventElapsedTime", ctypes.byref(ms), events[0], events[1])
                times.append(ms.value * 1e6 / launches)
            finally:
                destroyed = [self._try(driver, "cuEventDestroy", event) for event in events]
            failure = next((error for error in destroyed if error is not None), None)
            if failure is not None:
                raise failure
        return times

    def speedup(
        self,
        ref: PreparedLaunch,
        cand: PreparedLaunch,
        *,
        rounds: int = 10,
        iterations: int = 50,
        warmup: int = 20,
        flush_l2_bytes: int = 0,
    ) -> HarnessSpeedup:
        """Speedup of ``cand`` over ``ref``: ``rounds`` rounds of ``iterations`` timed launches each,
        alternating ref, cand, ref, cand, ... so that clock and thermal drift hit both alike. Both are
        warmed up with ``warmup`` launches first, and each round starts with one untimed launch (the
        other kernel ran last). ``flush_l2_bytes`` > 0 writes that many scratch bytes before every timed
        launch (a cold L2, as in an application where other work runs between launches)."""
        if rounds < 1:
            raise ValueError("rounds must be at least 1")
        self.time(ref, iterations=1, warmup=warmup)
        self.time(cand, iterations=1, warmup=warmup)
        ref_all: list[float] = []
        cand_all: list[float] = []
        ref_rounds: list[float] = []
        cand_rounds: list[float] = []
        for _ in range(rounds):
            for prepared, samples, medians in ((ref, ref_all, ref_rounds), (cand, cand_all, cand_rounds)):
                times = self.time(prepared, iterations=iterations, warmup=1, flush_l2_bytes=flush_l2_bytes)
                samples.extend(times)
                medians.append(statistics.median(times))
        ref_median = statistics.median(ref_all)
        cand_median = statistics.median(cand_all)
        return HarnessSpeedup(
            ref_round_medians_ns=ref_rounds,
            cand_round_medians_ns=cand_rounds,
            ref_median_ns=ref_median,
            cand_median_ns=cand_median,
            speedup=ref_median / cand_median if cand_median > 0 else float("inf"),
            rounds=rounds,
            iterations=iterations,
        )


# ----------------------------------------------------------------------------------------------------------
# Manual use


def main(argv: list[str] | None = None) -> int:
    """Time one captured launch with a reference and a candidate source:

    python -m benchmarks.event_harness --capture capture.bin --trace trace.jsonl --kernel NAME \
        --ref ref.cu --cand fixed.cu [--arch sm_90]
    """
    import tempfile

    from accordo.capture import read_capture
    from profiler.trace import LAUNCHES_SUFFIX, read_native_trace, read_trace

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--capture", type=Path, required=True, help="Accordo capture file")
    parser.add_argument(
        "--trace", type=Path, required=True,
        help="Accordo trace (grid, block, smem): the tracer's, or a recording's trace.jsonl",
    )  # fmt: skip
    parser.add_argument("--kernel", required=True, help="mangled kernel name")
    parser.add_argument("--ref", type=Path, required=True, help="reference CUDA source")
    parser.add_argument("--cand", type=Path, required=True, help="candidate CUDA source")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--launch", type=int, default=0, help="which launch of the kernel (default 0)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=50)
    args = parser.parse_args(argv)

    launches = read_capture(args.capture).for_kernel(args.kernel)
    native = Path(f"{args.trace}{LAUNCHES_SUFFIX}").is_file()
    every = read_native_trace(args.trace).launches() if native else read_trace(args.trace)
    named = (t for t in every if args.kernel in (t.name, t.demangled))
    traced = sorted(named, key=lambda t: (t.start, t.corr))
    if len(launches) <= args.launch or len(traced) <= args.launch:
        parser.error(f"launch {args.launch} of {args.kernel} is not in both the capture and the trace")
    launch, shape = launches[args.launch], traced[args.launch]
    with tempfile.TemporaryDirectory(prefix="event-harness-") as tmp, EventHarness() as harness:
        prepared = []
        for label, source in (("ref", args.ref), ("cand", args.cand)):
            kernel = harness.load(
                compile_cubin(source, Path(tmp) / f"{label}.cubin", arch=args.arch), launch.name
            )
            prepared.append(harness.prepare(kernel, launch, shape.grid, shape.block, shape.smem))
        result = harness.speedup(prepared[0], prepared[1], rounds=args.rounds, iterations=args.iterations)
    print(f"ref  median {result.ref_median_ns:12.0f} ns")
    print(f"cand median {result.cand_median_ns:12.0f} ns")
    print(f"speedup     {result.speedup:12.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

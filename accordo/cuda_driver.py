"""The few CUDA driver calls a replay makes (accordo.replay), through ctypes on libcuda.

No CUDA Python package is needed: the replay runs wherever the NVIDIA driver is installed. Every call is
checked; a failure raises ``DriverError`` naming the call and the driver's error name. The replay runs in
a process of its own (a kernel that faults leaves its context unusable), so this module keeps one
primary context and one non-blocking stream for the process and never resets anything.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence

__all__ = ["Driver", "DriverError"]

CU_STREAM_NON_BLOCKING = 1
CU_EVENT_DEFAULT = 0
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
DEFAULT_DYNAMIC_SHARED = 48 * 1024  # above this a kernel must opt in (cuFuncSetAttribute)

# One thread spinning on the global timer for the nanoseconds it is given. Queued before a timed launch, it
# keeps the stream busy while the host queues the event-launch-event triple, so the events bracket the
# kernel and not the host's launch overhead (a few microseconds through ctypes, more than a short kernel).
SPIN_PTX = """.version 7.0
.target sm_70
.address_size 64
.visible .entry intelliperf_spin(.param .u64 ns)
{
    .reg .pred %p;
    .reg .b64 %rd<5>;
    ld.param.u64 %rd1, [ns];
    mov.u64 %rd2, %globaltimer;
SPIN:
    mov.u64 %rd3, %globaltimer;
    sub.u64 %rd4, %rd3, %rd2;
    setp.lt.u64 %p, %rd4, %rd1;
    @%p bra SPIN;
    ret;
}
"""
SPIN_KERNEL = "intelliperf_spin"


class DriverError(RuntimeError):
    """A CUDA driver call failed."""


class Driver:
    """Device ``device``'s primary context and a stream of its own, current on this thread."""

    def __init__(self, device: int = 0) -> None:
        try:
            self._cuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise DriverError(f"the CUDA driver (libcuda.so.1) cannot be loaded: {exc}") from exc
        self._call("cuInit", ctypes.c_uint(0))
        dev = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(dev), ctypes.c_int(device))
        self.device = dev.value
        ctx = ctypes.c_void_p()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), dev)
        self._call("cuCtxSetCurrent", ctx)
        stream = ctypes.c_void_p()
        self._call("cuStreamCreate", ctypes.byref(stream), ctypes.c_uint(CU_STREAM_NON_BLOCKING))
        self.stream = stream
        self._spin: ctypes.c_void_p | None = None

    def _call(self, name: str, *args: object) -> None:
        result = getattr(self._cuda, name)(*args)
        if result != 0:
            text = ctypes.c_char_p()
            self._cuda.cuGetErrorName(result, ctypes.byref(text))
            error = text.value.decode() if text.value else f"error {result}"
            raise DriverError(f"{name} failed: {error}")

    # ---- modules -------------------------------------------------------------------------------------

    def load_module(self, image: bytes) -> ctypes.c_void_p:
        module = ctypes.c_void_p()
        self._call("cuModuleLoadData", ctypes.byref(module), ctypes.c_char_p(image))
        return module

    def module_function(self, module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
        function = ctypes.c_void_p()
        self._call("cuModuleGetFunction", ctypes.byref(function), module, ctypes.c_char_p(name.encode()))
        return function

    def module_variable(self, module: ctypes.c_void_p, name: str) -> tuple[int, int]:
        """The device address and size of the module's variable ``name``."""
        ptr, nbytes = ctypes.c_uint64(), ctypes.c_size_t()
        self._call(
            "cuModuleGetGlobal_v2",
            ctypes.byref(ptr),
            ctypes.byref(nbytes),
            module,
            ctypes.c_char_p(name.encode()),
        )
        return ptr.value, nbytes.value

    def load_function(self, image: bytes, name: str) -> ctypes.c_void_p:
        return self.module_function(self.load_module(image), name)

    def allow_dynamic_shared(self, function: ctypes.c_void_p, nbytes: int) -> None:
        """Opt ``function`` into ``nbytes`` of dynamic shared memory where that is above the default."""
        if nbytes > DEFAULT_DYNAMIC_SHARED:
            self._call(
                "cuFuncSetAttribute",
                function,
                ctypes.c_int(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
                ctypes.c_int(nbytes),
            )

    # ---- memory --------------------------------------------------------------------------------------

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1)))
        return ptr.value

    def free(self, ptr: int) -> None:
        self._call("cuMemFree_v2", ctypes.c_uint64(ptr))

    def upload(self, ptr: int, data: bytes | memoryview) -> None:
        if len(data) == 0:
            return
        buffer = (ctypes.c_char * len(data)).from_buffer_copy(data)
        self._call("cuMemcpyHtoD_v2", ctypes.c_uint64(ptr), buffer, ctypes.c_size_t(len(data)))

    def download(self, ptr: int, nbytes: int) -> bytes:
        buffer = ctypes.create_string_buffer(nbytes)
        if nbytes:
            self._call("cuMemcpyDtoH_v2", buffer, ctypes.c_uint64(ptr), ctypes.c_size_t(nbytes))
        return buffer.raw

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device to device, on the stream."""
        self._call(
            "cuMemcpyDtoDAsync_v2",
            ctypes.c_uint64(dst),
            ctypes.c_uint64(src),
            ctypes.c_size_t(nbytes),
            self.stream,
        )

    def fill(self, ptr: int, value: int, nbytes: int) -> None:
        """``nbytes`` bytes of ``value`` from ``ptr``, on the stream."""
        self._call(
            "cuMemsetD8Async",
            ctypes.c_uint64(ptr),
            ctypes.c_ubyte(value),
            ctypes.c_size_t(nbytes),
            self.stream,
        )

    def l2_bytes(self) -> int:
        value = ctypes.c_int()
        attribute = ctypes.c_int(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        self._call("cuDeviceGetAttribute", ctypes.byref(value), attribute, ctypes.c_int(self.device))
        return value.value

    # ---- launches and events -------------------------------------------------------------------------

    def launch(
        self,
        function: ctypes.c_void_p,
        grid: Sequence[int],
        block: Sequence[int],
        dynamic_shared: int,
        params: Sequence[bytes],
    ) -> None:
        """Queue ``function`` on the stream; ``params``: each parameter's bytes as the kernel takes them."""
        holders = [ctypes.create_string_buffer(p, len(p)) for p in params]
        pointers = (ctypes.c_void_p * max(len(holders), 1))(
            *[ctypes.cast(h, ctypes.c_void_p) for h in holders]
        )
        self._call(
            "cuLaunchKernel",
            function,
            *(ctypes.c_uint(v) for v in grid),
            *(ctypes.c_uint(v) for v in block),
            ctypes.c_uint(dynamic_shared),
            self.stream,
            pointers,
            None,
        )

    def hold(self, ns: int) -> None:
        """Queue a kernel that keeps the stream busy for ``ns`` nanoseconds (SPIN_PTX)."""
        if self._spin is None:
            self._spin = self.load_function(SPIN_PTX.encode(), SPIN_KERNEL)
        self.launch(self._spin, (1, 1, 1), (1, 1, 1), 0, [ctypes.c_uint64(ns).value.to_bytes(8, "little")])

    def synchronize(self) -> None:
        self._call("cuStreamSynchronize", self.stream)

    def event(self) -> ctypes.c_void_p:
        event = ctypes.c_void_p()
        self._call("cuEventCreate", ctypes.byref(event), ctypes.c_uint(CU_EVENT_DEFAULT))
        return event

    def record(self, event: ctypes.c_void_p) -> None:
        self._call("cuEventRecord", event, self.stream)

    def elapsed_ns(self, start: ctypes.c_void_p, end: ctypes.c_void_p) -> float:
        self._call("cuEventSynchronize", end)
        ms = ctypes.c_float()
        self._call("cuEventElapsedTime", ctypes.byref(ms), start, end)
        return ms.value * 1e6

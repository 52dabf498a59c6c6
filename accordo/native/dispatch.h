// The CUDA driver functions Accordo calls, resolved at first use from the libcuda.so.1 that is
// already loaded in the process (dlopen RTLD_NOLOAD, then plain RTLD_NOW) -- libcuda is never a
// link-time dependency. A function that cannot be resolved makes its wrapper return
// CUDA_ERROR_NOT_FOUND after printing "accordo: cannot resolve driver function <name>: ...".
//
// Symbol names go through ACCORDO_STR so that cuda.h's versioning macros apply
// (cuMemcpyDtoHAsync -> cuMemcpyDtoHAsync_v2, cuMemGetAddressRange -> cuMemGetAddressRange_v2).
#pragma once

#include <cuda.h>

#include <string>

#define ACCORDO_STR2(x) #x
#define ACCORDO_STR(x) ACCORDO_STR2(x)

namespace accordo::drv {

namespace detail {
// dlsym of `symbol` in libcuda; nullptr (and one message on stderr) on failure. Thread-safe.
void* resolve(const char* symbol);

template <typename Fn>
Fn load(const char* symbol) {
  return reinterpret_cast<Fn>(resolve(symbol));
}
}  // namespace detail

#define ACCORDO_DRIVER_CALL(fn, ...)                                                  \
  static const auto accordo_fn_ = detail::load<decltype(&::fn)>(ACCORDO_STR(fn));     \
  return accordo_fn_ != nullptr ? accordo_fn_(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND

inline CUresult ctx_synchronize() { ACCORDO_DRIVER_CALL(cuCtxSynchronize); }

inline CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  ACCORDO_DRIVER_CALL(cuMemGetAddressRange, base, size, ptr);
}

inline CUresult memcpy_dtoh_async(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  ACCORDO_DRIVER_CALL(cuMemcpyDtoHAsync, dst, src, bytes, stream);
}

inline CUresult stream_synchronize(CUstream stream) { ACCORDO_DRIVER_CALL(cuStreamSynchronize, stream); }

inline CUresult mem_host_register(void* p, size_t bytes, unsigned int flags) {
  ACCORDO_DRIVER_CALL(cuMemHostRegister, p, bytes, flags);
}

inline CUresult mem_host_unregister(void* p) { ACCORDO_DRIVER_CALL(cuMemHostUnregister, p); }

inline CUresult func_get_param_info(CUfunction f, size_t index, size_t* offset, size_t* size) {
  ACCORDO_DRIVER_CALL(cuFuncGetParamInfo, f, index, offset, size);
}

inline CUresult kernel_get_param_info(CUkernel k, size_t index, size_t* offset, size_t* size) {
  ACCORDO_DRIVER_CALL(cuKernelGetParamInfo, k, index, offset, size);
}

inline CUresult func_get_name(const char** name, CUfunction f) { ACCORDO_DRIVER_CALL(cuFuncGetName, name, f); }

inline CUresult get_error_name(CUresult error, const char** text) {
  ACCORDO_DRIVER_CALL(cuGetErrorName, error, text);
}

inline CUresult get_error_string(CUresult error, const char** text) {
  ACCORDO_DRIVER_CALL(cuGetErrorString, error, text);
}

// The stream's capture status; `per_thread` selects the _ptsz entry point (for a _ptsz launch, where
// stream 0 means the per-thread default stream).
inline CUresult stream_is_capturing(CUstream stream, CUstreamCaptureStatus* status, bool per_thread) {
  if (per_thread) {
    static const auto ptr = detail::load<decltype(&::cuStreamIsCapturing)>("cuStreamIsCapturing_ptsz");
    return ptr != nullptr ? ptr(stream, status) : CUDA_ERROR_NOT_FOUND;
  }
  ACCORDO_DRIVER_CALL(cuStreamIsCapturing, stream, status);
}

#undef ACCORDO_DRIVER_CALL

// "<what> failed: CUDA_ERROR_X (description)" for error messages.
std::string describe(const char* what, CUresult result);

}  // namespace accordo::drv

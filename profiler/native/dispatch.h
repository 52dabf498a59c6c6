// The CUDA driver functions Accordo calls, resolved at first use from the libcuda.so.1 that is
// already loaded in the process (dlopen RTLD_NOLOAD, then plain RTLD_NOW) -- libcuda is never a
// link-time dependency. A function that cannot be resolved makes its wrapper return
// CUDA_ERROR_NOT_FOUND after printing "intelliperf-profiler: cannot resolve driver function <name>: ...".
//
// Symbol names go through PROFILER_STR so that cuda.h's versioning macros apply
// (cuMemcpyDtoHAsync -> cuMemcpyDtoHAsync_v2, cuMemGetAddressRange -> cuMemGetAddressRange_v2).
#pragma once

#include <cuda.h>

#include <string>

#define PROFILER_STR2(x) #x
#define PROFILER_STR(x) PROFILER_STR2(x)

namespace profiler::drv {

namespace detail {
// dlsym of `symbol` in libcuda; nullptr (and one message on stderr) on failure. Thread-safe.
void* resolve(const char* symbol);

template <typename Fn>
Fn load(const char* symbol) {
  return reinterpret_cast<Fn>(resolve(symbol));
}
}  // namespace detail

#define PROFILER_DRIVER_CALL(fn, ...)                                                  \
  static const auto profiler_fn_ = detail::load<decltype(&::fn)>(PROFILER_STR(fn));     \
  return profiler_fn_ != nullptr ? profiler_fn_(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND

inline CUresult ctx_synchronize() { PROFILER_DRIVER_CALL(cuCtxSynchronize); }

inline CUresult mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) {
  PROFILER_DRIVER_CALL(cuMemGetAddressRange, base, size, ptr);
}

inline CUresult memcpy_dtoh_async(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  PROFILER_DRIVER_CALL(cuMemcpyDtoHAsync, dst, src, bytes, stream);
}

inline CUresult stream_synchronize(CUstream stream) { PROFILER_DRIVER_CALL(cuStreamSynchronize, stream); }

inline CUresult memcpy_htod(CUdeviceptr dst, const void* src, size_t bytes) {
  PROFILER_DRIVER_CALL(cuMemcpyHtoD, dst, src, bytes);
}

inline CUresult mem_host_register(void* p, size_t bytes, unsigned int flags) {
  PROFILER_DRIVER_CALL(cuMemHostRegister, p, bytes, flags);
}

inline CUresult mem_host_unregister(void* p) { PROFILER_DRIVER_CALL(cuMemHostUnregister, p); }

inline CUresult func_get_param_info(CUfunction f, size_t index, size_t* offset, size_t* size) {
  PROFILER_DRIVER_CALL(cuFuncGetParamInfo, f, index, offset, size);
}

inline CUresult kernel_get_param_info(CUkernel k, size_t index, size_t* offset, size_t* size) {
  PROFILER_DRIVER_CALL(cuKernelGetParamInfo, k, index, offset, size);
}

inline CUresult func_get_name(const char** name, CUfunction f) { PROFILER_DRIVER_CALL(cuFuncGetName, name, f); }

inline CUresult func_is_loaded(CUfunctionLoadingState* state, CUfunction f) {
  PROFILER_DRIVER_CALL(cuFuncIsLoaded, state, f);
}

inline CUresult func_load(CUfunction f) { PROFILER_DRIVER_CALL(cuFuncLoad, f); }

inline CUresult kernel_get_function(CUfunction* f, CUkernel kernel) {
  PROFILER_DRIVER_CALL(cuKernelGetFunction, f, kernel);
}

inline CUresult event_create(CUevent* event, unsigned int flags) { PROFILER_DRIVER_CALL(cuEventCreate, event, flags); }

inline CUresult event_record(CUevent event, CUstream stream) { PROFILER_DRIVER_CALL(cuEventRecord, event, stream); }

inline CUresult event_query(CUevent event) { PROFILER_DRIVER_CALL(cuEventQuery, event); }

inline CUresult event_synchronize(CUevent event) { PROFILER_DRIVER_CALL(cuEventSynchronize, event); }

inline CUresult event_elapsed_time(float* ms, CUevent start, CUevent end) {
  PROFILER_DRIVER_CALL(cuEventElapsedTime, ms, start, end);
}

inline CUresult event_destroy(CUevent event) { PROFILER_DRIVER_CALL(cuEventDestroy, event); }

inline CUresult module_load_data(CUmodule* module, const void* image) {
  PROFILER_DRIVER_CALL(cuModuleLoadData, module, image);
}

inline CUresult module_get_function(CUfunction* f, CUmodule module, const char* name) {
  PROFILER_DRIVER_CALL(cuModuleGetFunction, f, module, name);
}

inline CUresult mem_host_alloc(void** p, size_t bytes, unsigned int flags) {
  PROFILER_DRIVER_CALL(cuMemHostAlloc, p, bytes, flags);
}

inline CUresult mem_host_get_device_pointer(CUdeviceptr* d, void* p, unsigned int flags) {
  PROFILER_DRIVER_CALL(cuMemHostGetDevicePointer, d, p, flags);
}

inline CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                              unsigned bz, unsigned smem, CUstream stream, void** params, void** extra) {
  PROFILER_DRIVER_CALL(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra);
}

inline CUresult get_error_name(CUresult error, const char** text) {
  PROFILER_DRIVER_CALL(cuGetErrorName, error, text);
}

inline CUresult get_error_string(CUresult error, const char** text) {
  PROFILER_DRIVER_CALL(cuGetErrorString, error, text);
}

// The stream's capture status; `per_thread` selects the _ptsz entry point (for a _ptsz launch, where
// stream 0 means the per-thread default stream).
inline CUresult stream_is_capturing(CUstream stream, CUstreamCaptureStatus* status, bool per_thread) {
  if (per_thread) {
    static const auto ptr = detail::load<decltype(&::cuStreamIsCapturing)>("cuStreamIsCapturing_ptsz");
    return ptr != nullptr ? ptr(stream, status) : CUDA_ERROR_NOT_FOUND;
  }
  PROFILER_DRIVER_CALL(cuStreamIsCapturing, stream, status);
}

inline CUresult ctx_get_current(CUcontext* ctx) { PROFILER_DRIVER_CALL(cuCtxGetCurrent, ctx); }

inline CUresult ctx_get_device(CUdevice* device) { PROFILER_DRIVER_CALL(cuCtxGetDevice, device); }

inline CUresult device_get_attribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  PROFILER_DRIVER_CALL(cuDeviceGetAttribute, value, attribute, device);
}

inline CUresult func_get_attribute(int* value, CUfunction_attribute attribute, CUfunction f) {
  PROFILER_DRIVER_CALL(cuFuncGetAttribute, value, attribute, f);
}

inline CUresult kernel_get_attribute(int* value, CUfunction_attribute attribute, CUkernel kernel, CUdevice device) {
  PROFILER_DRIVER_CALL(cuKernelGetAttribute, value, attribute, kernel, device);
}

inline CUresult ctx_get_limit(size_t* value, CUlimit limit) { PROFILER_DRIVER_CALL(cuCtxGetLimit, value, limit); }

inline CUresult ctx_reset_persisting_l2_cache() { PROFILER_DRIVER_CALL(cuCtxResetPersistingL2Cache); }

#undef PROFILER_DRIVER_CALL

// "<what> failed: CUDA_ERROR_X (description)" for error messages.
std::string describe(const char* what, CUresult result);

}  // namespace profiler::drv

// The driver's kernel-launch entry points as seen from a CUPTI callback: which callbacks they are, and
// the function, arguments and stream of one launch. Shared by capture mode and time mode.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <array>

namespace accordo {

struct LaunchArgs {
  CUfunction function = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
  CUstream stream = nullptr;
  bool per_thread = false;  // a _ptsz entry point: stream 0 is the per-thread default stream
};

// cuLaunchKernel, cuLaunchKernelEx and their _ptsz variants.
inline constexpr std::array<CUpti_CallbackId, 4> kLaunchCallbacks = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};

// Fills `out` from a launch callback's functionParams; false for any other callback.
bool launch_args(CUpti_CallbackId cbid, const void* params, LaunchArgs& out);

// The launched kernel's mangled name: CUPTI's symbolName, else cuFuncGetName, else "<unknown kernel>".
const char* launch_kernel_name(const CUpti_CallbackData* info, const LaunchArgs& args);

// The stream handle to record events on for this launch (CU_STREAM_PER_THREAD for a _ptsz launch on
// stream 0).
CUstream launch_stream(const LaunchArgs& args);

// Subscribes `callback` and enables it for every launch entry point; false (with a message) on failure.
bool subscribe_launches(CUpti_CallbackFunc callback, CUpti_SubscriberHandle& subscriber);

}  // namespace accordo

// The driver's kernel-launch entry points as seen from a CUPTI callback: which callbacks they are, and
// the function, arguments and stream of one launch. Shared by capture mode and time mode.
#pragma once

#include <cuda.h>
#include <cupti.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace profiler {

struct LaunchArgs {
  CUfunction function = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
  CUstream stream = nullptr;
  bool per_thread = false;  // a _ptsz entry point: stream 0 is the per-thread default stream
  unsigned grid[3] = {0, 0, 0};
  unsigned block[3] = {0, 0, 0};
  unsigned dynamic_shared = 0;  // bytes
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

// Makes sure the launched function is loaded into the current context; returns a description of the
// failure, or "" when it is loaded. Why: under lazy module loading (CUDA_MODULE_LOADING=LAZY, the default)
// a function's first launch loads its module inside the launch call, and that load waits for the work
// already queued on the device. Time mode queues a gate ahead of the launch (gate.h) that holds the
// stream until the launch call returns, so a load left to the launch call would wait for the gate and
// the gate for the launch: a stall that only the gate's own 1 s limit broke. Loading first, before the
// gate is queued, leaves the launch call nothing to wait for. `function` may be a CUfunction or a CUkernel
// (the CUDA runtime launches library kernels by their CUkernel handle).
std::string load_function(CUfunction function);

// A kernel has at most this many parameters (kernel parameters are at most 32 KB).
inline constexpr size_t kMaxLaunchParams = 4096;

// The parameter's bytes: from kernelParams, or from the `extra` argument buffer; nullptr if neither.
const uint8_t* param_bytes(const LaunchArgs& args, size_t index, size_t offset, size_t size);

// The (offset, size) of every parameter of `f` (a CUfunction or a CUkernel); false with `problem` when
// the driver cannot say.
bool param_layout(CUfunction f, std::vector<std::pair<size_t, size_t>>& layout, std::string& problem);

// The stream handle to record events on for this launch (CU_STREAM_PER_THREAD for a _ptsz launch on
// stream 0).
CUstream launch_stream(const LaunchArgs& args);

// Subscribes `callback` and enables it for every launch entry point and for the `resources` callbacks
// (CUPTI_CB_DOMAIN_RESOURCE); false (with a message) on failure, after unsubscribing again.
bool subscribe_launches(CUpti_CallbackFunc callback, CUpti_SubscriberHandle& subscriber,
                        std::initializer_list<CUpti_CallbackId> resources = {});

}  // namespace profiler

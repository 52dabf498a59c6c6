#include "launch.h"

#include "dispatch.h"
#include "log.h"

namespace profiler {

namespace {

template <typename P>
void plain_launch(const P* p, bool per_thread, LaunchArgs& out) {
  out = {p->f, p->kernelParams, p->extra, p->hStream, per_thread,
         {p->gridDimX, p->gridDimY, p->gridDimZ}, {p->blockDimX, p->blockDimY, p->blockDimZ}, p->sharedMemBytes};
}

template <typename P>
void launch_ex(const P* p, bool per_thread, LaunchArgs& out) {
  out = {p->f, p->kernelParams, p->extra, nullptr, per_thread, {0, 0, 0}, {0, 0, 0}, 0};
  const CUlaunchConfig* c = p->config;
  if (c == nullptr) return;
  out.stream = c->hStream;
  out.grid[0] = c->gridDimX, out.grid[1] = c->gridDimY, out.grid[2] = c->gridDimZ;
  out.block[0] = c->blockDimX, out.block[1] = c->blockDimY, out.block[2] = c->blockDimZ;
  out.dynamic_shared = c->sharedMemBytes;
}

}  // namespace

bool launch_args(CUpti_CallbackId cbid, const void* params, LaunchArgs& out) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      plain_launch(static_cast<const cuLaunchKernel_params*>(params), false, out);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      plain_launch(static_cast<const cuLaunchKernel_ptsz_params*>(params), true, out);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      launch_ex(static_cast<const cuLaunchKernelEx_params*>(params), false, out);
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      launch_ex(static_cast<const cuLaunchKernelEx_ptsz_params*>(params), true, out);
      return true;
    default:
      return false;
  }
}

const char* launch_kernel_name(const CUpti_CallbackData* info, const LaunchArgs& args) {
  const char* name = info->symbolName;
  if ((name == nullptr || *name == '\0') && drv::func_get_name(&name, args.function) != CUDA_SUCCESS) {
    name = nullptr;
  }
  return name != nullptr && *name != '\0' ? name : "<unknown kernel>";
}

namespace {

std::string load_if_unloaded(CUfunction function, CUfunctionLoadingState state) {
  if (state == CU_FUNCTION_LOADING_STATE_LOADED) return std::string();
  const CUresult r = drv::func_load(function);
  return r == CUDA_SUCCESS ? std::string() : drv::describe("cuFuncLoad", r);
}

}  // namespace

std::string load_function(CUfunction function) {
  CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
  if (drv::func_is_loaded(&state, function) == CUDA_SUCCESS) return load_if_unloaded(function, state);
  // not a CUfunction: a CUkernel, whose function in the current context is what the launch runs
  CUfunction in_context = nullptr;
  CUresult r = drv::kernel_get_function(&in_context, reinterpret_cast<CUkernel>(function));
  if (r != CUDA_SUCCESS) return drv::describe("cuKernelGetFunction", r);
  r = drv::func_is_loaded(&state, in_context);
  if (r != CUDA_SUCCESS) return drv::describe("cuFuncIsLoaded", r);
  return load_if_unloaded(in_context, state);
}

const uint8_t* param_bytes(const LaunchArgs& args, size_t index, size_t offset, size_t size) {
  if (args.params != nullptr) return static_cast<const uint8_t*>(args.params[index]);
  if (args.extra == nullptr) return nullptr;
  const uint8_t* buffer = nullptr;
  size_t buffer_size = 0;
  for (size_t k = 0; k < 64 && args.extra[k] != CU_LAUNCH_PARAM_END; k += 2) {
    if (args.extra[k] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = static_cast<const uint8_t*>(args.extra[k + 1]);
    if (args.extra[k] == CU_LAUNCH_PARAM_BUFFER_SIZE && args.extra[k + 1] != nullptr) {
      buffer_size = *static_cast<const size_t*>(args.extra[k + 1]);
    }
  }
  if (buffer == nullptr || offset + size > buffer_size) return nullptr;
  return buffer + offset;
}

bool param_layout(CUfunction f, std::vector<std::pair<size_t, size_t>>& layout, std::string& problem) {
  bool as_kernel = false;
  for (size_t i = 0; i < kMaxLaunchParams; ++i) {
    size_t offset = 0;
    size_t size = 0;
    CUresult result = as_kernel ? drv::kernel_get_param_info(reinterpret_cast<CUkernel>(f), i, &offset, &size)
                                : drv::func_get_param_info(f, i, &offset, &size);
    if (result != CUDA_SUCCESS && i == 0 && !as_kernel && result != CUDA_ERROR_INVALID_VALUE) {
      // cuLaunchKernel also accepts a CUkernel (the CUDA runtime launches library kernels that way).
      const CUresult as_function = result;
      result = drv::kernel_get_param_info(reinterpret_cast<CUkernel>(f), i, &offset, &size);
      if (result == CUDA_SUCCESS || result == CUDA_ERROR_INVALID_VALUE) {
        as_kernel = true;
      } else {
        problem = drv::describe("cuFuncGetParamInfo", as_function) + "; " +
                  drv::describe("cuKernelGetParamInfo", result);
        return false;
      }
    }
    if (result == CUDA_ERROR_INVALID_VALUE) return true;  // past the last parameter
    if (result != CUDA_SUCCESS) {
      problem = drv::describe(as_kernel ? "cuKernelGetParamInfo" : "cuFuncGetParamInfo", result);
      return false;
    }
    layout.emplace_back(offset, size);
  }
  return true;
}

CUstream launch_stream(const LaunchArgs& args) {
  return args.per_thread && args.stream == nullptr ? CU_STREAM_PER_THREAD : args.stream;
}

bool subscribe_launches(CUpti_CallbackFunc callback, CUpti_SubscriberHandle& subscriber,
                        std::initializer_list<CUpti_CallbackId> resources) {
  subscriber = nullptr;
  bool ok = PROFILER_CUPTI(cuptiSubscribe(&subscriber, callback, nullptr));
  for (const CUpti_CallbackId cbid : kLaunchCallbacks) {
    ok = ok && PROFILER_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid));
  }
  for (const CUpti_CallbackId cbid : resources) {
    ok = ok && PROFILER_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, cbid));
  }
  if (!ok && subscriber != nullptr) {
    PROFILER_CUPTI(cuptiUnsubscribe(subscriber));
    subscriber = nullptr;
  }
  return ok;
}

}  // namespace profiler

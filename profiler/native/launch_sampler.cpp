#include "launch_sampler.h"

#include <cuda.h>

#include <chrono>
#include <initializer_list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "activity.h"
#include "dispatch.h"
#include "launch.h"
#include "log.h"
#include "sample_policy.h"

namespace profiler {

namespace {

// Launch entry points the callback does not count: whatever they launch is recorded.
constexpr std::initializer_list<CUpti_CallbackId> kRecordedLaunches = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
};

// Entry points that begin or end a stream capture: counted, so that while none is active no launch asks
// whether its stream is being captured (sample_policy.h).
constexpr std::initializer_list<CUpti_CallbackId> kCaptureBegins = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz,
};
constexpr std::initializer_list<CUpti_CallbackId> kCaptureEnds = {
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
};

struct FunctionCount {
  std::string name;
  uint64_t launches = 0;
  uint64_t unrecorded = 0;
};

struct Sampler {
  std::mutex mutex;
  std::unordered_map<CUfunction, FunctionCount> functions;  // a CUfunction or a CUkernel handle
  SamplePolicy policy;  // records start on: activity_start enabled them
  SamplerStats stats;
};

Sampler* g = nullptr;              // leaked on purpose: launches may come during static destruction
thread_local bool t_open = false;  // this thread's launch in progress is one of `open`

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Under g->mutex: switches kernel records, timed for the stats line; whether the switch took.
bool switch_records(bool on) {
  const uint64_t t0 = now_ns();
  const bool done = activity_kernels(on);
  g->stats.toggle_ns += now_ns() - t0;
  ++g->stats.toggles;
  return done;
}

template <typename Ids>
bool is_one_of(const Ids& ids, CUpti_CallbackId cbid) {
  for (const CUpti_CallbackId id : ids) {
    if (id == cbid) return true;
  }
  return false;
}

// At the API exit of a capture's begin or end: a begin that succeeded starts one; an end that returned
// the graph, or that the capture had been invalidated, ends one (any other failure ends nothing).
void on_capture_exit(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  const CUresult result =
      info->functionReturnValue != nullptr ? *static_cast<const CUresult*>(info->functionReturnValue) : CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(g->mutex);
  if (is_one_of(kCaptureBegins, cbid)) {
    if (result == CUDA_SUCCESS) capture_began(g->policy);
  } else if (result == CUDA_SUCCESS || result == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
    capture_ended(g->policy);
  }
}

bool capturing(const LaunchArgs& args) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return drv::stream_is_capturing(args.stream, &status, args.per_thread) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void on_enter(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  if (!is_one_of(kLaunchCallbacks, cbid)) {
    std::lock_guard<std::mutex> lock(g->mutex);
    record_uncounted(g->policy, switch_records);
    t_open = true;
    return;
  }
  LaunchArgs args;
  if (!launch_args(cbid, info->functionParams, args)) return;
  std::lock_guard<std::mutex> lock(g->mutex);
  FunctionCount& function = g->functions[args.function];
  if (function.launches == 0) function.name = launch_kernel_name(info, args);
  const LaunchFate fate = sample_launch(g->policy, ++function.launches, [&] { return capturing(args); }, switch_records);
  if (fate != LaunchFate::Uncounted) ++g->stats.launches;
  if (fate == LaunchFate::Sampled) t_open = true;
  if (fate == LaunchFate::Unrecorded) {
    ++function.unrecorded;
    ++g->stats.unrecorded;
  }
}

}  // namespace

bool sampler_start(CUpti_SubscriberHandle subscriber, uint64_t first, uint64_t every) {
  bool ok = true;
  for (const CUpti_CallbackId cbid : kLaunchCallbacks) {
    ok = ok && PROFILER_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid));
  }
  for (const CUpti_CallbackId cbid : kRecordedLaunches) {
    ok = ok && PROFILER_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid));
  }
  for (const auto& ids : {kCaptureBegins, kCaptureEnds}) {
    for (const CUpti_CallbackId cbid : ids) {
      ok = ok && PROFILER_CUPTI(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid));
    }
  }
  if (!ok) {  // no launch is half counted: every launch is recorded
    PROFILER_CUPTI(cuptiEnableDomain(0, subscriber, CUPTI_CB_DOMAIN_DRIVER_API));
    return false;
  }
  auto* sampler = new Sampler();
  sampler->policy.first = first;
  sampler->policy.every = every > 0 ? every : 1;
  g = sampler;  // before the first launch: InitializeInjection runs before the application's first CUDA call
  return true;
}

void sampler_on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  if (g == nullptr || info == nullptr) return;
  if (is_one_of(kCaptureBegins, cbid) || is_one_of(kCaptureEnds, cbid)) {
    if (info->callbackSite == CUPTI_API_EXIT) on_capture_exit(cbid, info);
    return;
  }
  if (info->callbackSite == CUPTI_API_ENTER) {
    try {
      on_enter(cbid, info);
    } catch (...) {
      log_error("a launch was not counted: out of memory");
    }
    return;
  }
  if (t_open) {
    std::lock_guard<std::mutex> lock(g->mutex);
    close_launch(g->policy);
    t_open = false;
  }
}

std::unordered_map<std::string, uint64_t> sampler_unrecorded() {
  std::unordered_map<std::string, uint64_t> by_name;
  if (g == nullptr) return by_name;
  std::lock_guard<std::mutex> lock(g->mutex);
  for (const auto& [function, count] : g->functions) {
    if (count.unrecorded > 0) by_name[count.name] += count.unrecorded;
  }
  return by_name;
}

SamplerStats sampler_stats() {
  if (g == nullptr) return {};
  std::lock_guard<std::mutex> lock(g->mutex);
  return g->stats;
}

}  // namespace profiler

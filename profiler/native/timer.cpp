#include "timer.h"

#include <cupti.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dispatch.h"
#include "gate.h"
#include "json_out.h"
#include "kernel_table.h"
#include "launch.h"
#include "log.h"

namespace profiler {

namespace {

// Event pairs whose end has not been read yet; past this many, finished pairs are read at each launch.
constexpr size_t kHarvestAbove = 1024;

struct TimedLaunch {
  const KernelEntry* kernel = nullptr;  // in State::kernels, where entries never move
  uint64_t index = 0;
  std::string request;  // JSON members: the launch's grid, block, dynamic shared memory and argument bytes
  CUevent start = nullptr;
  CUevent end = nullptr;
};

struct State {
  JsonlWriter writer;
  bool gated = true;  // false under CUDA_LAUNCH_BLOCKING=1, where a launch returns only once it ran
  bool quiesce = false;  // quiesce=1
  std::mutex mutex;   // guards everything below
  KernelTable kernels;
  std::deque<TimedLaunch> pending;
  bool finished = false;
};

State* g = nullptr;  // leaked on purpose: must outlive static destructors at exit

struct InFlight {
  bool active = false;
  TimedLaunch launch;
  CUstream stream = nullptr;
  CUcontext context = nullptr;
  uint32_t gate_ticket = 0;  // 0: no gate
  std::chrono::steady_clock::time_point gated_at;
};
thread_local InFlight t_launch;
thread_local bool t_inside = false;  // in our own callback: the driver calls we make there are not the app's

void write_line(const TimedLaunch& launch, const char* key, const std::string& value_json) {
  std::string line;
  line.reserve(192);
  line += "{\"name\":";
  append_json_string(line, launch.kernel->name);
  line += ",\"demangled\":";
  append_json_string(line, launch.kernel->demangled);
  line += ",\"index\":";
  line += std::to_string(launch.index);
  if (!launch.request.empty()) line += "," + launch.request;
  line += ",\"";
  line += key;
  line += "\":";
  line += value_json;
  line += '}';
  g->writer.write_line(line);
}

// What the launch asked the GPU to do: `"grid":[x,y,z],"block":[x,y,z],"shared":<bytes>,"args":[...]`, each
// argument's bytes in hex (null when the driver passed none), or "args":null when the driver cannot say
// how the parameters are laid out. The judge compares these with the launches it captured, so that a
// program cannot be timed on other work than it was judged on (accordo/timed_launches.py).
std::string launch_request(const LaunchArgs& args) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"grid\":[" + std::to_string(args.grid[0]) + "," + std::to_string(args.grid[1]) + "," +
                    std::to_string(args.grid[2]) + "],\"block\":[" + std::to_string(args.block[0]) + "," +
                    std::to_string(args.block[1]) + "," + std::to_string(args.block[2]) +
                    "],\"shared\":" + std::to_string(args.dynamic_shared) + ",\"args\":";
  std::vector<std::pair<size_t, size_t>> layout;
  std::string problem;
  if (!param_layout(args.function, layout, problem)) return out + "null";
  out += '[';
  for (size_t i = 0; i < layout.size(); ++i) {
    if (i > 0) out += ',';
    const uint8_t* bytes = param_bytes(args, i, layout[i].first, layout[i].second);
    if (bytes == nullptr) {
      out += "null";
      continue;
    }
    out += '"';
    for (size_t b = 0; b < layout[i].second; ++b) {
      out += kHex[bytes[b] >> 4];
      out += kHex[bytes[b] & 15];
    }
    out += '"';
  }
  return out + ']';
}

void write_error(const TimedLaunch& launch, const std::string& message) {
  std::string quoted;
  append_json_string(quoted, message);
  write_line(launch, "error", quoted);
}

void destroy_events(const TimedLaunch& launch) {
  for (CUevent event : {launch.start, launch.end}) {
    if (event == nullptr) continue;
    const CUresult r = drv::event_destroy(event);
    if (r != CUDA_SUCCESS) log_error("%s", drv::describe("cuEventDestroy", r).c_str());
  }
}

// Reads the finished pairs at the front of `pending`, in launch order. With `wait`, waits for every pair.
void harvest(bool wait) {
  while (!g->pending.empty()) {
    const TimedLaunch& launch = g->pending.front();
    const CUresult done = wait ? drv::event_synchronize(launch.end) : drv::event_query(launch.end);
    if (done == CUDA_ERROR_NOT_READY && !wait) return;
    if (done != CUDA_SUCCESS) {
      write_error(launch, drv::describe(wait ? "cuEventSynchronize" : "cuEventQuery", done));
    } else {
      float ms = 0.0f;
      const CUresult elapsed = drv::event_elapsed_time(&ms, launch.start, launch.end);
      if (elapsed != CUDA_SUCCESS) {
        write_error(launch, drv::describe("cuEventElapsedTime", elapsed));
      } else {
        // whole nanoseconds (events resolve about 0.5 us): no decimal point, whatever the app's locale
        write_line(launch, "ns", std::to_string(std::llround(static_cast<double>(ms) * 1e6)));
      }
    }
    destroy_events(launch);
    g->pending.pop_front();
  }
}

// the `quiesce` setting: the launch starts on an idle device (work the program queued elsewhere, on another
// stream, neither overlaps it nor finishes inside it) with no L2 lines kept persisting. Outside the state
// lock: the synchronization waits for the device. Returns the failure, or "".
std::string quiesce() {
  const CUresult synced = drv::ctx_synchronize();
  if (synced != CUDA_SUCCESS) return drv::describe("cuCtxSynchronize before the kernel", synced) + "; not timed";
  const CUresult reset = drv::ctx_reset_persisting_l2_cache();
  if (reset != CUDA_SUCCESS) return drv::describe("cuCtxResetPersistingL2Cache", reset) + "; not timed";
  return std::string();
}

void on_enter(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  t_launch.active = false;
  LaunchArgs args;
  if (!launch_args(cbid, info->functionParams, args)) return;
  const char* name = launch_kernel_name(info, args);

  KernelEntry* kernel = nullptr;
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    if (g->finished) return;
    kernel = &g->kernels.entry(name);
    if (!kernel->matched) return;
  }
  // A launch being captured into a graph is reported, never loaded or gated: a driver call the capture
  // does not expect could invalidate the application's graph.
  CUstreamCaptureStatus capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult capturing = drv::stream_is_capturing(args.stream, &capture_status, args.per_thread);
  std::string problem;
  if (capturing != CUDA_SUCCESS) {
    problem = drv::describe("cuStreamIsCapturing", capturing) + "; not timed";
  } else if (capture_status != CU_STREAM_CAPTURE_STATUS_NONE) {
    problem = "the launch is being captured into a CUDA graph; not timed";
  } else if (g->gated) {
    // before the gate, and outside the state lock: a load waits for the work queued on the device
    const std::string unloaded = load_function(args.function);
    if (!unloaded.empty()) problem = unloaded + " (loading the kernel before its gate); not timed";
  }
  if (problem.empty() && capture_status == CU_STREAM_CAPTURE_STATUS_NONE && g->quiesce) {
    problem = quiesce();
  }
  std::string request = problem.empty() ? launch_request(args) : std::string();

  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->finished) return;
  TimedLaunch launch;
  launch.kernel = kernel;
  launch.index = kernel->next_index++;
  if (!problem.empty()) {
    write_error(launch, problem);
    return;
  }
  launch.request = std::move(request);
  for (CUevent* event : {&launch.start, &launch.end}) {
    const CUresult created = drv::event_create(event, CU_EVENT_DEFAULT);
    if (created != CUDA_SUCCESS) {
      write_error(launch, drv::describe("cuEventCreate", created) + "; not timed");
      destroy_events(launch);
      return;
    }
  }
  const CUstream stream = launch_stream(args);
  uint32_t ticket = 0;
  if (g->gated) {
    const std::string held = gate_hold(info->context, stream, ticket);
    if (!held.empty()) {
      write_error(launch, held + "; not timed");
      destroy_events(launch);
      return;
    }
  }
  const CUresult recorded = drv::event_record(launch.start, stream);
  if (recorded != CUDA_SUCCESS) {
    if (ticket != 0) gate_release(info->context, ticket);
    write_error(launch, drv::describe("cuEventRecord before the kernel", recorded) + "; not timed");
    destroy_events(launch);
    return;
  }
  t_launch = {true, std::move(launch), stream, info->context, ticket, std::chrono::steady_clock::now()};
}

void on_exit(const CUpti_CallbackData* info) {
  if (!t_launch.active) return;
  t_launch.active = false;
  const TimedLaunch& launch = t_launch.launch;
  const CUresult launched =
      info->functionReturnValue != nullptr ? *static_cast<const CUresult*>(info->functionReturnValue) : CUDA_SUCCESS;
  const CUresult recorded =
      launched == CUDA_SUCCESS ? drv::event_record(launch.end, t_launch.stream) : CUDA_SUCCESS;
  // open the gate before anything that may wait (the state lock, a harvest): the stream is held until then
  if (t_launch.gate_ticket != 0) gate_release(t_launch.context, t_launch.gate_ticket);
  const double held_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_launch.gated_at).count();
  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->finished) return;
  std::string problem;
  if (launched != CUDA_SUCCESS) {
    problem = drv::describe("the kernel launch", launched);
  } else if (recorded != CUDA_SUCCESS) {
    problem = drv::describe("cuEventRecord after the kernel", recorded);
  } else if (t_launch.gate_ticket != 0 && held_s >= 0.9 * kGateTimeoutS) {
    // the gate may have opened on its own before the launch was queued: host time would be counted
    problem = "the launch call took " + std::to_string(held_s) + " s, about as long as the gate holds the "
              "stream; not timed";
  }
  if (!problem.empty()) {
    write_error(launch, problem);
    destroy_events(launch);
    return;
  }
  g->pending.push_back(launch);
  if (g->pending.size() > kHarvestAbove) harvest(false);
}

void CUPTIAPI on_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  if (g == nullptr || t_inside) return;
  struct Inside {
    Inside() { t_inside = true; }
    ~Inside() { t_inside = false; }
  } inside;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
      std::lock_guard<std::mutex> lock(g->mutex);  // the context's events go with it: read them now
      harvest(true);
      gate_forget(static_cast<const CUpti_ResourceData*>(data)->context);
      return;
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (info->callbackSite == CUPTI_API_ENTER) {
      on_enter(cbid, info);
    } else {
      on_exit(info);
    }
  } catch (const std::exception& e) {
    t_launch.active = false;
    log_error("timing failed for this launch: %s", e.what());
  } catch (...) {
    t_launch.active = false;
    log_error("timing failed for this launch");
  }
}

}  // namespace

bool timer_start(const Config& config) {
  g = new State();
  g->quiesce = config.quiesce;
  if (!g->writer.open(config.output)) return false;
  g->writer.write_line("{\"accordo\":\"time\",\"version\":1,\"pid\":" + std::to_string(getpid()) + "}");
  const std::string bad_pattern = g->kernels.set_pattern(config.kernel_regex);
  if (!bad_pattern.empty()) {
    log_error("%s", bad_pattern.c_str());
    std::string line = "{\"error\":";
    append_json_string(line, bad_pattern);
    g->writer.write_line(line + "}");
    g->writer.publish();  // a complete file that says why nothing was timed
    g = nullptr;
    return false;
  }
  const char* blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (blocking != nullptr && std::string(blocking) == "1") {
    g->gated = false;  // a gate would hold every blocking launch for its full second
    log_error("CUDA_LAUNCH_BLOCKING=1: launches are timed without a gate; the start events may count host time");
  }
  CUpti_SubscriberHandle subscriber = nullptr;
  if (!subscribe_launches(on_callback, subscriber, {CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING})) {
    g->writer.discard();
    g = nullptr;  // a callback still delivered finds no state and does nothing
    return false;
  }
  return true;
}

void timer_finish() {
  if (g == nullptr) return;
  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->finished) return;
  g->finished = true;
  harvest(true);
  g->writer.publish();
}

}  // namespace profiler

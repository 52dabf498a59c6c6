#include "capture.h"

#include <cupti.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "activity.h"
#include "capture_file.h"
#include "cubin_symbols.h"
#include "dispatch.h"
#include "kernel_table.h"
#include "launch.h"
#include "log.h"
#include "restore.h"
#include "snapshot.h"

namespace profiler {

namespace {

// One device range to copy: an allocation, or its first max_bytes from the pointer when capped.
struct Snapshot {
  uint32_t param_index;
  uint64_t start;
  uint64_t nbytes;
};

struct Pending {
  bool active = false;
  uint64_t seq = 0;
  std::vector<Snapshot> snapshots;
};

// Snapshot copies through the CUDA driver: cuMemcpyDtoHAsync on the current context's legacy default
// stream (the GPU is idle: the caller synchronized the context), into memory page-locked with
// cuMemHostRegister. The library owns that memory: if its context is destroyed (cudaDeviceReset), the
// registration goes with it and later copies simply run at pageable speed.
class DriverCopier final : public DeviceCopier {
 public:
  std::string pin(void* p, size_t nbytes) override {
    const CUresult r = drv::mem_host_register(p, nbytes, CU_MEMHOSTREGISTER_PORTABLE);
    return r == CUDA_SUCCESS ? std::string() : drv::describe("cuMemHostRegister", r);
  }
  void unpin(void* p) override {
    const CUresult r = drv::mem_host_unregister(p);
    if (r != CUDA_SUCCESS) log_error("%s", drv::describe("cuMemHostUnregister", r).c_str());
  }
  std::string start_copy(void* dst, uint64_t src, size_t nbytes) override {
    const CUresult r = drv::memcpy_dtoh_async(dst, static_cast<CUdeviceptr>(src), nbytes, nullptr);
    return r == CUDA_SUCCESS ? std::string() : drv::describe("cuMemcpyDtoHAsync", r);
  }
  std::string wait_copy() override {
    const CUresult r = drv::stream_synchronize(nullptr);
    return r == CUDA_SUCCESS ? std::string() : drv::describe("cuStreamSynchronize after cuMemcpyDtoHAsync", r);
  }
};

struct State {
  Config config;

  std::mutex mutex;  // guards the members below and the file
  CaptureFile file;
  KernelTable kernels;
  uint64_t next_seq = 0;
  DriverCopier copier;
  std::unique_ptr<SnapshotWriter> snapshots;
  std::unique_ptr<Restorer> restorer;  // the `restore` setting: the reference's inputs for each launch
  bool finished = false;
  uint64_t next_module = 0;
  std::unordered_map<std::string, uint64_t> module_of;  // kernel -> its latest MODULE record
  bool over_budget = false;  // a launch's snapshots could have passed the `capture_budget` setting: none from then on

  std::mutex time_mutex;  // guards the timing hand-off from the activity thread
  std::unordered_map<uint32_t, uint64_t> seq_by_correlation;
  std::vector<std::array<uint64_t, 3>> times;  // seq, start, end
};

State* g = nullptr;  // leaked on purpose: must outlive static destructors at exit
thread_local Pending t_pending;

void drain_times() {
  std::vector<std::array<uint64_t, 3>> times;
  {
    std::lock_guard<std::mutex> lock(g->time_mutex);
    times.swap(g->times);
  }
  for (const auto& t : times) g->file.write_time(t[0], t[1], t[2]);
}

void snapshot(uint64_t seq, const std::vector<Snapshot>& snapshots, uint32_t phase) {
  for (const Snapshot& s : snapshots) g->snapshots->write(seq, s.param_index, phase, s.start, s.nbytes);
}

// The reference's bytes into this launch's buffers (the `restore` setting), then a synchronization so that the
// copies have landed before the before-snapshot and the kernel. False (with an ERROR record) on a failure:
// the launch then runs on inputs that are neither its own nor the reference's, and is not captured.
bool restore_inputs(uint64_t seq, const std::vector<Snapshot>& snapshots) {
  bool ok = true;
  for (const Snapshot& s : snapshots) {
    const std::string problem = g->restorer->restore(seq, s.param_index, s.start, s.nbytes);
    if (!problem.empty()) {
      g->file.write_error(seq, "restoring the reference's parameter " + std::to_string(s.param_index) +
                                   " failed: " + problem + "; buffers not captured");
      ok = false;
    }
  }
  if (!ok) return false;
  const CUresult synced = drv::ctx_synchronize();
  if (synced != CUDA_SUCCESS) {
    g->file.write_error(seq, drv::describe("cuCtxSynchronize after restoring the reference's inputs", synced) +
                                 "; buffers not captured");
    return false;
  }
  return true;
}

// Empty if the launch's snapshots (before and after, at most) fit the capture budget with what is written;
// else why not. Once over, every later launch is over too: a capture never skips one launch and keeps the
// next.
std::string over_budget(const std::vector<Snapshot>& snapshots) {
  uint64_t need = 0;
  for (const Snapshot& s : snapshots) need += 2 * s.nbytes;
  const uint64_t written = g->snapshots->stats().written_bytes;
  const uint64_t budget = g->config.capture_budget;
  if (!g->over_budget && written + need <= budget) return "";
  g->over_budget = true;
  return "capture budget: this launch's buffers need up to " + std::to_string(need) + " bytes and " +
         std::to_string(written) + " are written; the budget is " + std::to_string(budget) +
         " bytes (the `capture_budget` setting); buffers not captured";
}

// A loaded module that holds a matching kernel is kept in the file (MODULE record), so that a replay can
// load the code the launches ran.
void on_module_loaded(const CUpti_ResourceData* data) {
  const auto* module = static_cast<const CUpti_ModuleResourceData*>(data->resourceDescriptor);
  if (module == nullptr || module->pCubin == nullptr || module->cubinSize == 0) return;
  const std::vector<std::string> names = cubin_function_names(module->pCubin, module->cubinSize);
  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->finished || !g->file.ok()) return;
  std::vector<std::string> matched;
  for (const std::string& name : names) {
    if (g->kernels.entry(name.c_str()).matched) matched.push_back(name);
  }
  if (matched.empty()) return;
  const uint64_t index = g->next_module++;
  g->file.write_module(index, matched, module->pCubin, module->cubinSize);
  for (const std::string& name : matched) g->module_of[name] = index;
  g->file.flush();
}

LaunchShape launch_shape(const LaunchArgs& args, const std::string& name, bool graph_capture) {
  LaunchShape shape;
  for (int i = 0; i < 3; ++i) shape.grid[i] = args.grid[i], shape.block[i] = args.block[i];
  shape.dynamic_shared = args.dynamic_shared;
  shape.flags = (graph_capture ? kShapeGraphCapture : 0) | (args.per_thread ? kShapePerThread : 0);
  shape.stream = reinterpret_cast<uint64_t>(args.stream);
  size_t persisting = 0;
  if (drv::ctx_get_limit(&persisting, CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == CUDA_SUCCESS) {
    shape.persisting_l2 = persisting;
  }
  const auto module = g->module_of.find(name);
  if (module != g->module_of.end()) shape.module = module->second;
  return shape;
}

void on_enter(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  t_pending.active = false;
  LaunchArgs args;
  if (!launch_args(cbid, info->functionParams, args)) return;
  const char* name = launch_kernel_name(info, args);
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    if (g->finished || !g->file.ok() || !g->kernels.entry(name).matched) return;
  }
  // A launch being captured into a graph is not loaded: a driver call the capture does not expect could
  // invalidate the application's graph. Otherwise, outside the lock: a lazily loaded module is loaded
  // here, so that its MODULE record comes before the LAUNCH.
  CUstreamCaptureStatus capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult capturing = drv::stream_is_capturing(args.stream, &capture_status, args.per_thread);
  const bool graph_capture = capturing == CUDA_SUCCESS && capture_status != CU_STREAM_CAPTURE_STATUS_NONE;
  const std::string unloaded = capturing == CUDA_SUCCESS && !graph_capture ? load_function(args.function) : "";

  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->finished || !g->file.ok()) return;
  KernelEntry& kernel = g->kernels.entry(name);

  LaunchInfo launch;
  launch.launch_index = kernel.next_index++;
  launch.seq = g->next_seq++;
  launch.name = name;
  launch.demangled = kernel.demangled;
  {
    std::lock_guard<std::mutex> time_lock(g->time_mutex);
    g->seq_by_correlation[info->correlationId] = launch.seq;
  }

  std::vector<std::string> problems;
  if (!unloaded.empty()) problems.push_back(unloaded + " (loading the kernel before the capture)");
  std::vector<std::pair<size_t, size_t>> layout;
  std::string layout_problem;
  if (!param_layout(args.function, layout, layout_problem)) problems.push_back(layout_problem);

  std::vector<Snapshot> snapshots;
  for (size_t i = 0; i < layout.size(); ++i) {
    ParamInfo p;
    p.index = static_cast<uint32_t>(i);
    p.offset = static_cast<uint32_t>(layout[i].first);
    p.size = static_cast<uint32_t>(layout[i].second);
    const uint8_t* bytes = param_bytes(args, i, p.offset, p.size);
    if (bytes == nullptr) {
      p.kind = ParamKind::Unavailable;
      launch.params.push_back(std::move(p));
      continue;
    }
    CUdeviceptr base = 0;
    size_t alloc_size = 0;
    uint64_t value = 0;
    if (p.size == sizeof(uint64_t)) std::memcpy(&value, bytes, sizeof(value));
    if (value != 0 && drv::mem_get_address_range(&base, &alloc_size, static_cast<CUdeviceptr>(value)) ==
                          CUDA_SUCCESS) {
      p.kind = ParamKind::Pointer;
      p.value = value;
      p.alloc_base = base;
      p.alloc_size = alloc_size;
      const bool seen = std::any_of(snapshots.begin(), snapshots.end(), [&](const Snapshot& s) {
        return launch.params[s.param_index].alloc_base == base;
      });
      if (!seen) {
        Snapshot s{p.index, base, alloc_size};
        if (alloc_size > g->config.max_bytes) {  // capped: the window starting at the pointer
          s.start = value;
          s.nbytes = std::min<uint64_t>(g->config.max_bytes, base + alloc_size - value);
        }
        snapshots.push_back(s);
      }
    } else {
      p.kind = ParamKind::Scalar;
      p.bytes.assign(bytes, bytes + p.size);
    }
    launch.params.push_back(std::move(p));
  }
  if (layout.empty() == false && args.params == nullptr && args.extra == nullptr) {
    problems.emplace_back("the launch passed neither kernelParams nor extra; parameter values are unavailable");
  }

  g->file.write_launch(launch);
  g->file.write_shape(launch.seq, launch_shape(args, name, graph_capture));
  for (const std::string& problem : problems) g->file.write_error(launch.seq, problem);

  if (capturing != CUDA_SUCCESS) {
    g->file.write_error(launch.seq, drv::describe("cuStreamIsCapturing", capturing) + "; buffers not captured");
  } else if (graph_capture) {
    g->file.write_error(launch.seq, "the launch is being captured into a CUDA graph; buffers not captured");
  } else if (const std::string budget = over_budget(snapshots); !budget.empty()) {
    g->file.write_error(launch.seq, budget);
  } else {
    const CUresult synced = drv::ctx_synchronize();
    if (synced != CUDA_SUCCESS) {
      g->file.write_error(launch.seq, drv::describe("cuCtxSynchronize before the kernel", synced) +
                                          "; buffers not captured");
    } else if (g->restorer == nullptr || restore_inputs(launch.seq, snapshots)) {
      snapshot(launch.seq, snapshots, 0);
      t_pending.active = true;
      t_pending.seq = launch.seq;
      t_pending.snapshots = std::move(snapshots);
    }
  }
  g->file.flush();
}

void on_exit(const CUpti_CallbackData* info) {
  if (!t_pending.active) return;
  t_pending.active = false;
  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->finished) return;
  const uint64_t seq = t_pending.seq;
  const CUresult launched =
      info->functionReturnValue != nullptr ? *static_cast<const CUresult*>(info->functionReturnValue) : CUDA_SUCCESS;
  if (launched != CUDA_SUCCESS) {
    g->file.write_error(seq, drv::describe("the kernel launch", launched));
  } else {
    const CUresult synced = drv::ctx_synchronize();
    if (synced != CUDA_SUCCESS) {
      g->file.write_error(seq, drv::describe("the kernel (cuCtxSynchronize after it)", synced));
    } else {
      snapshot(seq, t_pending.snapshots, 1);
    }
  }
  t_pending.snapshots.clear();
  drain_times();
  g->file.flush();
}

void CUPTIAPI on_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  if (g == nullptr) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    try {
      if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) on_module_loaded(static_cast<const CUpti_ResourceData*>(data));
    } catch (const std::exception& e) {
      log_error("a loaded module was not kept: %s", e.what());
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  try {
    if (info->callbackSite == CUPTI_API_ENTER) {
      on_enter(cbid, info);
    } else {
      on_exit(info);
    }
  } catch (const std::exception& e) {
    t_pending.active = false;
    log_error("capture failed for this launch: %s", e.what());
  } catch (...) {
    t_pending.active = false;
    log_error("capture failed for this launch");
  }
}

void on_kernel_record(const KernelRecord& record) {
  std::lock_guard<std::mutex> lock(g->time_mutex);
  const auto it = g->seq_by_correlation.find(record.correlation_id);
  if (it == g->seq_by_correlation.end()) return;
  g->times.push_back({it->second, record.start_ns, record.end_ns});
  g->seq_by_correlation.erase(it);
}

}  // namespace

bool capture_start(const Config& config) {
  g = new State();
  g->config = config;
  if (!g->file.open(config.output)) return false;
  SnapshotOptions options;
  options.dedupe = config.dedupe;
  g->snapshots = std::make_unique<SnapshotWriter>(g->file, g->copier, options);
  if (!config.restore_dir.empty()) g->restorer = std::make_unique<Restorer>(config.restore_dir);
  const std::string bad_pattern = g->kernels.set_pattern(config.kernel_regex);
  if (!bad_pattern.empty()) {
    log_error("%s", bad_pattern.c_str());
    g->file.write_error(CaptureFile::kNoLaunch, bad_pattern);
    g->file.finish();
    return false;
  }

  CUpti_SubscriberHandle subscriber = nullptr;
  bool ok = subscribe_launches(on_callback, subscriber, {CUPTI_CBID_RESOURCE_MODULE_LOADED});
  if (ok) ok = activity_start(on_kernel_record);
  if (!ok) {
    g->file.write_error(CaptureFile::kNoLaunch, "CUPTI could not be set up; see the process's stderr");
    g->file.finish();
    return false;
  }
  return true;
}

void capture_finish() {
  if (g == nullptr) return;
  activity_flush();  // not under g->mutex: records arrive through on_kernel_record
  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->finished) return;
  g->finished = true;
  drain_times();
  g->file.finish();
  if (g->config.stats) {
    const SnapshotStats& s = g->snapshots->stats();
    log_error("capture stats: %llu snapshots (%llu SAME) took %.3f s: %.3f GB copied (%.3f s waiting for "
              "copies), %.3f GB compared (%.3f s), %.3f GB written (%.3f s), mapping back %.3f s",
              static_cast<unsigned long long>(s.snapshots), static_cast<unsigned long long>(s.same), s.total_s,
              static_cast<double>(s.copied_bytes) / 1e9, s.wait_s, static_cast<double>(s.compared_bytes) / 1e9,
              s.compare_s, static_cast<double>(s.written_bytes) / 1e9, s.write_s, s.map_s);
  }
}

}  // namespace profiler

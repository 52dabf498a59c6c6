#include "counters.h"

#include <cupti.h>
#include <cupti_pcsampling.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch.h"
#include "json_out.h"
#include "launch.h"
#include "log.h"
#include "names.h"
#include "range_profiler.h"
#include "sass_metrics.h"

namespace profiler {

namespace {

struct Target {
  uint64_t launches = 0;  // launches seen (executions, not stream captures)
  bool metrics_done = false;
  bool sass_done = false;
};

struct State {
  Config config;
  JsonlWriter writer;
  // Guards everything below; held from the enter to the exit callback of a profiled launch. Recursive: a
  // module loaded during that launch (lazy loading) reports itself on the same thread.
  std::recursive_mutex mutex;
  std::unordered_map<std::string, Target> targets;
  size_t metrics_left = 0;
  RangeProfiler range;
  bool range_tried = false;
  std::string range_problem;
  CUcontext range_context = nullptr;
  SassMetrics sass;
  bool sass_tried = false;
  std::string sass_problem;
  std::set<uint64_t> cubins_written;
  bool device_written = false;
  bool finished = false;
};

State* g = nullptr;  // leaked on purpose: must outlive static destructors at exit

// The launch in flight on this thread between its enter and exit callbacks.
struct InFlight {
  bool active = false;
  bool metrics = false;
  bool sass = false;
  std::string name;
  uint64_t index = 0;
  CUcontext context = nullptr;
  std::chrono::steady_clock::time_point started;
};
thread_local InFlight t_launch;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void append_number(std::string& line, double value) {
  if (!std::isfinite(value)) {
    line += "null";
    return;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", value);
  line += text;
}

void append_strings(std::string& line, const std::vector<std::string>& values) {
  line += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) line += ',';
    append_json_string(line, values[i]);
  }
  line += ']';
}

void write_error(const std::string& kernel, const std::string& what, const std::string& problem) {
  std::string line = "{\"error\":";
  append_json_string(line, problem);
  line += ",\"stage\":";
  append_json_string(line, what);
  if (!kernel.empty()) {
    line += ",\"kernel\":";
    append_json_string(line, kernel);
  }
  g->writer.write_line(line + "}");
}

int attribute(CUdevice device, CUdevice_attribute which) {
  int value = -1;
  return drv::device_get_attribute(&value, which, device) == CUDA_SUCCESS ? value : -1;
}

// The device's facts that the formulas and the occupancy limit need, once per process.
void write_device(CUdevice device) {
  if (g->device_written) return;
  g->device_written = true;
  std::string line = "{\"device\":" + std::to_string(device);
  const std::pair<const char*, CUdevice_attribute> facts[] = {
      {"sm_count", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
      {"l2_bytes", CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE},
      {"registers_per_sm", CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR},
      {"max_blocks_per_sm", CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR},
      {"max_threads_per_sm", CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
      {"warp_size", CU_DEVICE_ATTRIBUTE_WARP_SIZE},
      {"compute_major", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
      {"compute_minor", CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
  };
  for (const auto& [key, which] : facts) {
    line += ",\"";
    line += key;
    line += "\":" + std::to_string(attribute(device, which));
  }
  g->writer.write_line(line + "}");
}

int function_attribute(CUfunction f, CUdevice device, CUfunction_attribute which) {
  int value = -1;
  if (drv::func_get_attribute(&value, which, f) == CUDA_SUCCESS) return value;
  // cuLaunchKernel also takes a CUkernel (the CUDA runtime launches library kernels that way)
  return drv::kernel_get_attribute(&value, which, reinterpret_cast<CUkernel>(f), device) == CUDA_SUCCESS ? value
                                                                                                        : -1;
}

void append_dims(std::string& line, unsigned x, unsigned y, unsigned z) {
  line += '[' + std::to_string(x) + ',' + std::to_string(y) + ',' + std::to_string(z) + ']';
}

// The first launch's configuration and the function's resources.
void write_launch(const std::string& name, CUpti_CallbackId cbid, const CUpti_CallbackData* info,
                  const LaunchArgs& args, CUdevice device) {
  std::string line = "{\"kernel\":";
  append_json_string(line, name);
  line += ",\"demangled\":";
  append_json_string(line, demangle(name.c_str()));
  unsigned grid[3] = {0, 0, 0};
  unsigned block[3] = {0, 0, 0};
  unsigned dynamic_shared = 0;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz) {
    const auto* p = static_cast<const cuLaunchKernel_params*>(info->functionParams);
    grid[0] = p->gridDimX, grid[1] = p->gridDimY, grid[2] = p->gridDimZ;
    block[0] = p->blockDimX, block[1] = p->blockDimY, block[2] = p->blockDimZ;
    dynamic_shared = p->sharedMemBytes;
  } else {
    const auto* p = static_cast<const cuLaunchKernelEx_params*>(info->functionParams);
    if (p->config != nullptr) {
      grid[0] = p->config->gridDimX, grid[1] = p->config->gridDimY, grid[2] = p->config->gridDimZ;
      block[0] = p->config->blockDimX, block[1] = p->config->blockDimY, block[2] = p->config->blockDimZ;
      dynamic_shared = p->config->sharedMemBytes;
    }
  }
  line += ",\"grid\":";
  append_dims(line, grid[0], grid[1], grid[2]);
  line += ",\"block\":";
  append_dims(line, block[0], block[1], block[2]);
  line += ",\"registers\":" + std::to_string(function_attribute(args.function, device, CU_FUNC_ATTRIBUTE_NUM_REGS));
  line += ",\"static_shared\":" +
          std::to_string(function_attribute(args.function, device, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES));
  line += ",\"dynamic_shared\":" + std::to_string(dynamic_shared);
  line += ",\"local_bytes\":" +
          std::to_string(function_attribute(args.function, device, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES));
  g->writer.write_line(line + "}");
}

void begin_metrics(const std::string& name, CUcontext ctx, CUdevice device) {
  if (!g->range_tried) {
    g->range_tried = true;
    g->range_problem = g->range.init(ctx, static_cast<int>(device), g->config.metrics);
    if (g->range_problem.empty()) {
      g->range_context = ctx;
      std::string line = "{\"metrics\":";
      append_strings(line, g->range.metrics());
      line += ",\"unsupported\":";
      append_strings(line, g->range.unsupported());
      line += ",\"chip\":";
      append_json_string(line, g->range.chip());
      line += ",\"passes\":" + std::to_string(g->range.passes());
      g->writer.write_line(line + "}");
    } else {
      log_error("the range profiler is not available: %s", g->range_problem.c_str());
      write_error("", "metrics", g->range_problem);
    }
  }
  if (!g->range_problem.empty()) return;
  if (ctx != g->range_context) {
    write_error(name, "metrics", "launched in another CUDA context than the first profiled kernel");
    return;
  }
  const std::string problem = g->range.begin();
  if (!problem.empty()) {
    write_error(name, "metrics", problem);
    return;
  }
  t_launch.metrics = true;
}

void end_metrics() {
  std::vector<double> values;
  const std::string problem = g->range.end(values);
  Target& target = g->targets[t_launch.name];
  target.metrics_done = true;
  --g->metrics_left;
  if (!problem.empty()) {
    write_error(t_launch.name, "metrics", problem);
  } else {
    std::string line = "{\"kernel\":";
    append_json_string(line, t_launch.name);
    line += ",\"launch\":" + std::to_string(t_launch.index) + ",\"metrics\":{";
    const std::vector<std::string>& names = g->range.metrics();
    for (size_t i = 0; i < names.size(); ++i) {
      if (i > 0) line += ',';
      append_json_string(line, names[i]);
      line += ':';
      append_number(line, values[i]);
    }
    line += "},\"seconds\":";
    append_number(line, seconds_since(t_launch.started));
    g->writer.write_line(line + "}");
  }
  if (g->metrics_left == 0) g->range.finish();  // nothing more to profile: later launches run unhindered
}

void begin_sass(const std::string& name, CUcontext ctx, CUdevice device, CUfunction function) {
  if (!g->sass_tried) {
    g->sass_tried = true;
    g->sass_problem = g->sass.init(static_cast<int>(device), g->config.sass_metrics);
    if (g->sass_problem.empty()) {
      std::string line = "{\"sass_metrics\":";
      append_strings(line, g->sass.metrics());
      line += ",\"unsupported\":";
      append_strings(line, g->sass.unsupported());
      g->writer.write_line(line + "}");
    } else {
      log_error("SASS metrics are not available: %s", g->sass_problem.c_str());
      write_error("", "sass", g->sass_problem);
    }
  }
  if (!g->sass_problem.empty()) return;
  const std::string problem = g->sass.begin(ctx, function);
  if (!problem.empty()) {
    write_error(name, "sass", problem);
    return;
  }
  t_launch.sass = true;
}

void end_sass() {
  SassResult result;
  const std::string problem = g->sass.end(t_launch.context, t_launch.name, result);
  g->targets[t_launch.name].sass_done = true;
  if (result.instructions.empty()) {
    write_error(t_launch.name, "sass", problem);
    return;
  }
  if (!problem.empty()) write_error(t_launch.name, "sass", problem);
  std::string line = "{\"kernel\":";
  append_json_string(line, t_launch.name);
  line += ",\"launch\":" + std::to_string(t_launch.index) + ",\"cubin\":" + std::to_string(result.cubin_crc);
  line += ",\"pc\":[";
  for (size_t i = 0; i < result.instructions.size(); ++i) {
    if (i > 0) line += ',';
    line += std::to_string(result.instructions[i].pc_offset);
  }
  line += "],\"counts\":{";
  const std::vector<std::string>& names = g->sass.metrics();
  for (size_t m = 0; m < names.size(); ++m) {
    if (m > 0) line += ',';
    append_json_string(line, names[m]);
    line += ":[";
    for (size_t i = 0; i < result.instructions.size(); ++i) {
      if (i > 0) line += ',';
      line += std::to_string(result.instructions[i].values[m]);
    }
    line += ']';
  }
  line += "},\"seconds\":";
  append_number(line, seconds_since(t_launch.started));
  g->writer.write_line(line + "}");
}

bool is_capturing(const LaunchArgs& args) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return drv::stream_is_capturing(args.stream, &status, args.per_thread) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void on_enter(CUpti_CallbackId cbid, const CUpti_CallbackData* info) {
  LaunchArgs args;
  if (!launch_args(cbid, info->functionParams, args)) return;
  const std::string name = launch_kernel_name(info, args);
  g->mutex.lock();  // held until this launch's exit callback when it is profiled; a launch on another
                    // thread then waits, so that no other kernel runs inside a profiled range
  auto it = g->targets.find(name);
  if (g->finished || it == g->targets.end() || is_capturing(args)) {
    g->mutex.unlock();
    return;
  }
  Target& target = it->second;
  const uint64_t index = ++target.launches;
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  drv::ctx_get_current(&ctx);
  drv::ctx_get_device(&device);
  if (index == 1) {
    write_device(device);
    write_launch(name, cbid, info, args, device);
  }
  t_launch = InFlight{};
  t_launch.name = name;
  t_launch.index = index;
  t_launch.context = ctx;
  t_launch.started = std::chrono::steady_clock::now();
  if (index == g->config.metrics_launch && !target.metrics_done) {
    const std::string loaded = load_function(args.function);  // its module loads now, outside the range
    if (loaded.empty()) {
      begin_metrics(name, ctx, device);
    } else {
      write_error(name, "metrics", loaded);
    }
  }
  if (index == g->config.sass_launch && !target.sass_done && !t_launch.metrics) {
    begin_sass(name, ctx, device, args.function);
  }
  if (t_launch.metrics || t_launch.sass) {
    t_launch.active = true;  // the mutex stays locked until on_exit
    return;
  }
  if (index == g->config.metrics_launch && !target.metrics_done) {
    target.metrics_done = true;  // could not start: not profiled, and nothing more will be tried
    --g->metrics_left;
    if (g->metrics_left == 0) g->range.finish();
  }
  g->mutex.unlock();
}

void on_exit() {
  if (!t_launch.active) return;
  t_launch.active = false;
  if (t_launch.metrics) end_metrics();
  if (t_launch.sass) end_sass();
  g->mutex.unlock();
}

void save_cubin(const CUpti_ResourceData* data) {
  const auto* module = static_cast<const CUpti_ModuleResourceData*>(data->resourceDescriptor);
  if (module == nullptr || module->pCubin == nullptr || module->cubinSize == 0) return;
  const char* bytes = module->pCubin;
  const std::string_view image(bytes, module->cubinSize);
  bool holds_target = false;  // a target's name is in the module's string table
  for (const auto& [name, target] : g->targets) {
    if (image.find(name) != std::string_view::npos) {
      holds_target = true;
      break;
    }
  }
  if (!holds_target) return;
  CUpti_GetCubinCrcParams crc{};
  crc.size = CUpti_GetCubinCrcParamsSize;
  crc.cubinSize = module->cubinSize;
  crc.cubin = module->pCubin;
  if (!PROFILER_CUPTI(cuptiGetCubinCrc(&crc))) return;
  if (!g->cubins_written.insert(crc.cubinCrc).second) return;
  const std::string path = g->config.cubin_dir + "/" + std::to_string(crc.cubinCrc) + ".cubin";
  std::FILE* file = std::fopen(path.c_str(), "wb");
  bool ok = file != nullptr && std::fwrite(bytes, 1, module->cubinSize, file) == module->cubinSize;
  if (file != nullptr) ok = std::fclose(file) == 0 && ok;
  if (!ok) {
    write_error("", "cubin", "cannot write " + path + ": " + std::strerror(errno));
    return;
  }
  g->writer.write_line("{\"cubin\":" + std::to_string(crc.cubinCrc) + ",\"bytes\":" +
                       std::to_string(module->cubinSize) + "}");
}

void CUPTIAPI on_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  if (g == nullptr) return;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      const auto* resource = static_cast<const CUpti_ResourceData*>(data);
      std::lock_guard<std::recursive_mutex> lock(g->mutex);
      if (cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED && !g->finished) save_cubin(resource);
      if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING && resource->context == g->range_context) {
        g->range.finish();  // the range profiler goes with its context
        g->range_context = nullptr;
      }
      return;
    }
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    if (info->callbackSite == CUPTI_API_ENTER) {
      on_enter(cbid, info);
    } else {
      on_exit();
    }
  } catch (const std::exception& e) {
    log_error("counters failed for this launch: %s", e.what());
  } catch (...) {
    log_error("counters failed for this launch");
  }
}

}  // namespace

bool counters_start(const Config& config) {
  g = new State();
  g->config = config;
  for (const std::string& name : config.kernels) g->targets[name];
  g->metrics_left = g->config.metrics.empty() || g->config.metrics_launch == 0 ? 0 : g->targets.size();
  for (auto& [name, target] : g->targets) {
    target.metrics_done = g->metrics_left == 0;
    target.sass_done = config.sass_metrics.empty() || config.sass_launch == 0;
  }
  if (!g->writer.open(config.output)) return false;
  g->writer.write_line("{\"accordo\":\"counters\",\"version\":1,\"pid\":" + std::to_string(getpid()) + "}");
  CUpti_SubscriberHandle subscriber = nullptr;
  if (!subscribe_launches(on_callback, subscriber,
                          {CUPTI_CBID_RESOURCE_MODULE_LOADED, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING})) {
    g->writer.discard();
    g = nullptr;
    return false;
  }
  return true;
}

void counters_finish() {
  if (g == nullptr) return;
  std::lock_guard<std::recursive_mutex> lock(g->mutex);
  if (g->finished) return;
  g->finished = true;
  g->range.finish();
  for (const auto& [name, target] : g->targets) {  // how many launches each had: which got no counters
    std::string line = "{\"kernel\":";
    append_json_string(line, name);
    g->writer.write_line(line + ",\"launches\":" + std::to_string(target.launches) + "}");
  }
  g->writer.write_line("{\"end\":true}");
  g->writer.publish();
}

}  // namespace profiler

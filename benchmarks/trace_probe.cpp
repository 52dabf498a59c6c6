// Probe injection library for benchmarks/trace_overhead.py: the steps of libintelliperf_profiler's trace mode, each
// switchable by environment variable and each timed with steady_clock (CLOCK_MONOTONIC on Linux, the
// clock Python's time.monotonic_ns reads), so that the traced run's extra wall time can be split into
// libcupti's load, CUPTI set-up, the application's own run and the exit.
//
// Built twice: with -DPROBE_NO_CUPTI (no libcupti at all: the injection mechanism alone; PROBE_DLOPEN=1
// then dlopens libcupti.so and times that) and linked to libcupti.
//   PROBE_STAGE     none | register | enable | full (default full: enable + flush at exit)
//   PROBE_KIND      concurrent (default) | kernel
//   PROBE_BUF       host activity buffer bytes (default 8 MiB); PROBE_CALLOC=1 allocates it zeroed
//   PROBE_ZEROED    1 sets CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER (CUPTI skips its memset)
//   PROBE_DEVBUF    CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE; PROBE_PREALLOC ..._PRE_ALLOCATE_VALUE
//   PROBE_FLUSH     forced (default) | zero | none
//   PROBE_FINALIZE  1: after the flush, cuptiActivityDisable + cuptiFinalize
//   PROBE_STAGE=callback  a driver-API callback on every kernel launch that only counts (no activity)
//   PROBE_SAMPLE    N > 0 (with stage full): the launch callback too, and the kernel activity on only while a
//                   launch is among the first N of its function or (PROBE_STRIDE=S) every S-th after them:
//                   what a sampled trace costs, toggles included ("launches", "toggles", "toggle_ns")
//                   With stage callback and no PROBE_TIMER the callback counts per function and times nothing.
//   PROBE_TIMER=events  (stage callback, PROBE_SAMPLE=N) the sampled launches timed without kernel activity: a
//                   CUDA event pair recorded on the launch's stream in the callback (API enter and exit),
//                   finished pairs read at later sampled launches ("event_pairs", "event_ms")
//   PROBE_OVERHEAD  1: CUPTI's own overhead records too (CUPTI_ACTIVITY_KIND_OVERHEAD), their time summed by
//                   kind ("overhead_ns": instrumentation, buffer_flush, resource, ...); "records" counts the
//                   kernel records only
//   PROBE_MODULES   1: a callback at each module load that reads the module's functions and hashes their code
//                   with the profiler's own code (profiler/native/cubin_symbols.cpp), keeping them as
//                   trace.cpp does ("modules", "module_bytes", "module_functions", "module_ns"): what the
//                   trace's code hashes cost a program that loads many or large modules (PyTorch's)
// At exit (library destructor) prints one line "probe: {json}" on stderr with the timestamps in ns.
#include <dlfcn.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#ifndef PROBE_NO_CUPTI
#include <cupti.h>

#include <mutex>
#include <set>

#include "../profiler/native/cubin_symbols.cpp"
#endif

namespace {

uint64_t now() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const char* env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

struct Times {
  uint64_t ctor = 0, init0 = 0, dlopen = 0, attrs = 0, reg = 0, enable = 0, init1 = 0;
  uint64_t exit0 = 0, flush = 0, finalize = 0, exit1 = 0;
  uint64_t records = 0, buffers = 0, errors = 0;
  std::atomic<uint64_t> launches{0};
  uint64_t toggles = 0, toggle_ns = 0;
  uint64_t event_pairs = 0;
  double event_ms = 0;
  uint64_t overhead_ns[10] = {};  // by overhead_slot()
  uint64_t modules = 0, module_bytes = 0, module_functions = 0, module_ns = 0;
} g_t;

// CUpti_ActivityOverheadKind's values in the order of their names below (the enum's values are sparse).
const char* const kOverheadNames[10] = {"unknown", "driver_compiler", "buffer_flush", "instrumentation",
                                        "resource", "module_loading", "lazy_function_loading",
                                        "command_buffer_full", "buffer_request", "uvm_init"};

[[gnu::constructor]] void on_load() { g_t.ctor = now(); }

#ifndef PROBE_NO_CUPTI
size_t g_buf = size_t{8} << 20;
bool g_calloc = false;

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "probe: %s failed: %s\n", what, text != nullptr ? text : "?");
  ++g_t.errors;
}

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(g_calloc ? std::calloc(1, g_buf) : std::aligned_alloc(8, g_buf));
  *size = *buffer != nullptr ? g_buf : 0;
  *max_records = 0;
  ++g_t.buffers;
}

size_t overhead_slot(uint32_t kind) {
  if (kind == CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER) return 1;
  const uint32_t high = kind >> 16;  // ..._CUPTI_BUFFER_FLUSH = 1<<16 to ..._UVM_ACTIVITY_INIT = 8<<16
  return (kind & 0xffff) == 0 && high >= 1 && high <= 8 ? high + 1 : 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (valid > 0 && cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_OVERHEAD) {
      ++g_t.records;
      continue;
    }
    const auto* overhead = reinterpret_cast<const CUpti_ActivityOverhead3*>(record);
    if (overhead->end > overhead->start) {
      g_t.overhead_ns[overhead_slot(overhead->overheadKind)] += overhead->end - overhead->start;
    }
    std::free(overhead->overheadData);  // the client's to free (cupti_activity.h)
  }
  std::free(buffer);
}

void set_attr(CUpti_ActivityAttribute attr, const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return;
  if (attr == CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER) {
    uint8_t value = static_cast<uint8_t>(std::atoi(v));
    size_t size = sizeof(value);
    check(cuptiActivitySetAttribute(attr, &size, &value), name);
  } else {
    size_t value = std::strtoull(v, nullptr, 10);
    size_t size = sizeof(value);
    check(cuptiActivitySetAttribute(attr, &size, &value), name);
  }
}

CUpti_ActivityKind kind() {  // read once: the toggles call it on the launch path
  static const CUpti_ActivityKind chosen = std::string(env("PROBE_KIND", "concurrent")) == "kernel"
                                               ? CUPTI_ACTIVITY_KIND_KERNEL
                                               : CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  return chosen;
}

uint64_t g_sample = 0;  // 0: no sampling (the callback only counts)
uint64_t g_stride = 0;
bool g_active = false;  // the kernel activity is on
std::unordered_map<CUfunction, uint64_t>* g_counts = nullptr;

CUfunction launched_function(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return static_cast<const cuLaunchKernel_params*>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
      return static_cast<const cuLaunchKernel_ptsz_params*>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
      return static_cast<const cuLaunchKernelEx_params*>(params)->f;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
      return static_cast<const cuLaunchKernelEx_ptsz_params*>(params)->f;
    default:
      return nullptr;
  }
}

CUstream launched_stream(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
      return static_cast<const cuLaunchKernel_params*>(params)->hStream;
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz: {
      CUstream s = static_cast<const cuLaunchKernel_ptsz_params*>(params)->hStream;
      return s != nullptr ? s : CU_STREAM_PER_THREAD;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx: {
      const CUlaunchConfig* c = static_cast<const cuLaunchKernelEx_params*>(params)->config;
      return c != nullptr ? c->hStream : nullptr;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz: {
      const CUlaunchConfig* c = static_cast<const cuLaunchKernelEx_ptsz_params*>(params)->config;
      return c != nullptr && c->hStream != nullptr ? c->hStream : CU_STREAM_PER_THREAD;
    }
    default:
      return nullptr;
  }
}

#define PROBE_STR2(x) #x
#define PROBE_STR(x) PROBE_STR2(x)

// A driver function from the libcuda the application has loaded (the probe does not link libcuda, and the
// CUDA runtime loads it RTLD_LOCAL, out of RTLD_DEFAULT's reach); the name through cuda.h's versioning macros.
template <typename Fn>
Fn driver(const char* name) {
  static void* const libcuda = [] {
    void* loaded = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return loaded != nullptr ? loaded : dlopen("libcuda.so.1", RTLD_NOW);
  }();
  void* symbol = libcuda != nullptr ? dlsym(libcuda, name) : nullptr;
  if (symbol == nullptr) {
    std::fprintf(stderr, "probe: driver function %s not found\n", name);
    ++g_t.errors;
  }
  return reinterpret_cast<Fn>(symbol);
}
#define PROBE_DRIVER(fn) driver<decltype(&::fn)>(PROBE_STR(fn))

bool g_events = false;
bool g_toggle = false;  // stage full with PROBE_SAMPLE: the kernel activity switched per launch
std::vector<std::pair<CUevent, CUevent>>* g_pairs = nullptr;  // recorded, not yet read
thread_local CUevent t_open_end = nullptr;                        // the end event of this thread's launch

void read_finished_pairs() {
  static const auto query = PROBE_DRIVER(cuEventQuery);
  static const auto elapsed = PROBE_DRIVER(cuEventElapsedTime);
  static const auto destroy = PROBE_DRIVER(cuEventDestroy);
  size_t kept = 0;
  for (const auto& [start, end] : *g_pairs) {
    if (query(end) != CUDA_SUCCESS) {
      (*g_pairs)[kept++] = {start, end};
      continue;
    }
    float ms = 0;
    if (elapsed(&ms, start, end) == CUDA_SUCCESS) g_t.event_ms += ms, ++g_t.event_pairs;
    destroy(start);
    destroy(end);
  }
  g_pairs->resize(kept);
}

// The sampled launch's event pair: start recorded at API enter, end at API exit, on the launch's stream.
void time_with_events(const CUpti_CallbackData* info, CUpti_CallbackId cbid, bool sampled) {
  static const auto create = PROBE_DRIVER(cuEventCreate);
  static const auto record = PROBE_DRIVER(cuEventRecord);
  const CUstream stream = launched_stream(cbid, info->functionParams);
  if (info->callbackSite == CUPTI_API_EXIT) {
    if (t_open_end != nullptr && record(t_open_end, stream) != CUDA_SUCCESS) ++g_t.errors;
    t_open_end = nullptr;
    return;
  }
  if (!sampled) return;
  read_finished_pairs();
  CUevent start = nullptr, end = nullptr;
  if (create(&start, CU_EVENT_DEFAULT) != CUDA_SUCCESS || create(&end, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
      record(start, stream) != CUDA_SUCCESS) {
    ++g_t.errors;
    return;
  }
  g_pairs->emplace_back(start, end);
  t_open_end = end;
}

void CUPTIAPI on_launch(void*, CUpti_CallbackDomain, CUpti_CallbackId cbid, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (g_events && info->callbackSite == CUPTI_API_EXIT) return time_with_events(info, cbid, false);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  g_t.launches.fetch_add(1, std::memory_order_relaxed);
  if (g_sample == 0) return;
  const uint64_t n = ++(*g_counts)[launched_function(cbid, info->functionParams)];
  const bool want = n <= g_sample || (g_stride > 0 && (n - g_sample) % g_stride == 0);
  if (g_events) return time_with_events(info, cbid, want);
  if (!g_toggle || want == g_active) return;
  const uint64_t t0 = now();
  check(want ? cuptiActivityEnable(kind()) : cuptiActivityDisable(kind()), "toggle");
  g_active = want;
  g_t.toggle_ns += now() - t0;
  ++g_t.toggles;
}

// Each loaded module's functions and code hashes, kept by name as trace.cpp keeps them.
void on_module_loaded(const void* data) {
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  const auto* module = static_cast<const CUpti_ModuleResourceData*>(resource->resourceDescriptor);
  if (module == nullptr || module->pCubin == nullptr || module->cubinSize == 0) return;
  static std::mutex mutex;
  static auto* codes = new std::unordered_map<std::string, std::set<uint64_t>>();
  const uint64_t t0 = now();
  const std::vector<profiler::FunctionCode> functions = profiler::cubin_function_code(module->pCubin, module->cubinSize);
  std::lock_guard<std::mutex> lock(mutex);
  for (const profiler::FunctionCode& function : functions) (*codes)[function.name].insert(function.hash);
  g_t.module_ns += now() - t0;
  ++g_t.modules;
  g_t.module_bytes += module->cubinSize;
  g_t.module_functions += functions.size();
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) on_module_loaded(data);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) on_launch(nullptr, domain, cbid, data);
}

// The one subscriber CUPTI allows: the launch entry points (`launches`) and module loads (`modules`).
void subscribe(bool launches, bool modules) {
  CUpti_SubscriberHandle subscriber = nullptr;
  check(cuptiSubscribe(&subscriber, on_callback, nullptr), "subscribe");
  if (modules) {
    check(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED),
          "enable module callback");
  }
  if (!launches) return;
  for (CUpti_CallbackId cbid :
       {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz})
    check(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, cbid), "enable callback");
}

void at_exit() {
  g_t.exit0 = now();
  const std::string flush = env("PROBE_FLUSH", "forced");
  if (flush == "forced") check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "flush forced");
  if (flush == "zero") check(cuptiActivityFlushAll(0), "flush 0");
  g_t.flush = now();
  if (std::string(env("PROBE_FINALIZE", "0")) == "1") {
    check(cuptiActivityDisable(kind()), "disable");
    check(cuptiFinalize(), "finalize");
  }
  g_t.finalize = now();
  g_t.exit1 = now();
}
#endif

[[gnu::destructor]] void on_unload() {
  const uint64_t dtor = now();
  std::string overheads;
#ifndef PROBE_NO_CUPTI
  for (size_t i = 0; i < 10; ++i) {
    if (g_t.overhead_ns[i] == 0) continue;
    overheads += (overheads.empty() ? "\"" : ",\"") + std::string(kOverheadNames[i]) + "\":" +
                 std::to_string(g_t.overhead_ns[i]);
  }
#endif
  std::fprintf(stderr,
               "probe: {\"ctor\":%llu,\"init0\":%llu,\"dlopen\":%llu,\"attrs\":%llu,\"reg\":%llu,\"enable\":%llu,"
               "\"init1\":%llu,\"exit0\":%llu,\"flush\":%llu,\"finalize\":%llu,\"exit1\":%llu,\"dtor\":%llu,"
               "\"records\":%llu,\"buffers\":%llu,\"errors\":%llu,\"launches\":%llu,\"toggles\":%llu,"
               "\"toggle_ns\":%llu,\"event_pairs\":%llu,\"event_ms\":%.6f,\"modules\":%llu,\"module_bytes\":%llu,"
               "\"module_functions\":%llu,\"module_ns\":%llu,\"overhead_ns\":{%s}}\n",
               (unsigned long long)g_t.ctor, (unsigned long long)g_t.init0, (unsigned long long)g_t.dlopen,
               (unsigned long long)g_t.attrs, (unsigned long long)g_t.reg, (unsigned long long)g_t.enable,
               (unsigned long long)g_t.init1, (unsigned long long)g_t.exit0, (unsigned long long)g_t.flush,
               (unsigned long long)g_t.finalize, (unsigned long long)g_t.exit1, (unsigned long long)dtor,
               (unsigned long long)g_t.records, (unsigned long long)g_t.buffers, (unsigned long long)g_t.errors,
               (unsigned long long)g_t.launches.load(), (unsigned long long)g_t.toggles,
               (unsigned long long)g_t.toggle_ns, (unsigned long long)g_t.event_pairs, g_t.event_ms,
               (unsigned long long)g_t.modules, (unsigned long long)g_t.module_bytes,
               (unsigned long long)g_t.module_functions, (unsigned long long)g_t.module_ns, overheads.c_str());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  g_t.init0 = now();
#ifdef PROBE_NO_CUPTI
  if (std::string(env("PROBE_DLOPEN", "0")) == "1") {
    if (dlopen("libcupti.so", RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::fprintf(stderr, "probe: dlopen libcupti.so failed: %s\n", dlerror());
      ++g_t.errors;
    }
  }
  g_t.dlopen = now();
  g_t.attrs = g_t.reg = g_t.enable = g_t.dlopen;
#else
  g_t.dlopen = g_t.init0;
  const std::string stage = env("PROBE_STAGE", "full");
  g_buf = std::strtoull(env("PROBE_BUF", "8388608"), nullptr, 10);
  g_calloc = std::string(env("PROBE_CALLOC", "0")) == "1";
  if (stage != "none") {
    set_attr(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, "PROBE_ZEROED");
    set_attr(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, "PROBE_DEVBUF");
    set_attr(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, "PROBE_PREALLOC");
  }
  g_t.attrs = now();
  if (stage != "none" && stage != "callback") {
    check(cuptiActivityRegisterCallbacks(requested, completed), "register");
  }
  g_sample = std::strtoull(env("PROBE_SAMPLE", "0"), nullptr, 10);
  g_stride = std::strtoull(env("PROBE_STRIDE", "0"), nullptr, 10);
  g_events = stage == "callback" && g_sample > 0 && std::string(env("PROBE_TIMER", "")) == "events";
  g_toggle = stage == "full" && g_sample > 0;
  const bool launches = stage == "callback" || g_sample > 0;
  if (launches) {
    g_counts = new std::unordered_map<CUfunction, uint64_t>();
    g_pairs = new std::vector<std::pair<CUevent, CUevent>>();
  }
  const bool modules = std::string(env("PROBE_MODULES", "0")) == "1";
  if (launches || modules) subscribe(launches, modules);
  g_t.reg = now();
  if (stage == "enable" || stage == "full") {
    check(cuptiActivityEnable(kind()), "enable");
    if (std::string(env("PROBE_OVERHEAD", "0")) == "1") {
      check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_OVERHEAD), "enable overhead");
    }
    g_active = true;
  }
  g_t.enable = now();
  if (stage == "full") std::atexit(at_exit);
#endif
  g_t.init1 = now();
  return 1;
}

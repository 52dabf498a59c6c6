#include "trace.h"

#include <cupti.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "activity.h"
#include "cubin_symbols.h"
#include "json_out.h"
#include "launch_sampler.h"
#include "log.h"
#include "names.h"

namespace profiler {

namespace {

// One kernel execution in <output>.launches (FORMAT.md): 64 bytes, little-endian on every supported host.
struct LaunchRecord {
  uint32_t kernel;  // line number in the kernel table, from 0
  uint32_t correlation_id;
  uint64_t start_ns;
  uint64_t end_ns;
  int32_t grid[3];
  int32_t block[3];
  int32_t shared_memory;
  uint32_t registers;
  uint32_t device;
  uint32_t stream;
};
static_assert(sizeof(LaunchRecord) == 64, "the launch record is 64 bytes (FORMAT.md)");

// Written from the sink only (CUPTI's buffer thread, or the thread that flushes), under `mutex`.
struct State {
  JsonlWriter kernels;   // <output>: header, one line per kernel, the closing line
  JsonlWriter launches;  // <output>.launches
  std::mutex mutex;
  std::unordered_map<std::string, uint32_t> ids;
  std::vector<std::string> names;  // by id
  std::unordered_map<std::string, std::set<uint64_t>> codes;  // each function's code hashes, by module load
  std::string last_name;  // most records repeat the kernel of the record before
  uint32_t last_id = 0;
  uint64_t count = 0;
};

State* g = nullptr;  // leaked on purpose: must outlive static destructors at exit
bool g_stats = false;
bool g_sampling = false;  // sample_every > 1: launches counted, records for samples only (launch_sampler.h)
uint64_t g_start_ns = 0;  // trace_start's own duration (steady_clock), for the `stats` setting

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

// The kernel's id, writing its table line (with the demangled name) the first time it is seen.
uint32_t kernel_id(const char* name) {
  if (g->count > 0 && g->last_name == name) return g->last_id;
  auto it = g->ids.find(name);
  if (it == g->ids.end()) {
    const uint32_t id = static_cast<uint32_t>(g->ids.size());
    it = g->ids.emplace(name, id).first;
    g->names.emplace_back(name);
    std::string line = "{\"kernel\":" + std::to_string(id) + ",\"name\":";
    append_json_string(line, name);
    line += ",\"demangled\":";
    append_json_string(line, demangle(name));
    line += '}';
    g->kernels.write_line(line);
  }
  g->last_name = name;
  g->last_id = it->second;
  return it->second;
}

void write_record(const KernelRecord& r) {
  std::lock_guard<std::mutex> lock(g->mutex);
  LaunchRecord record{};
  record.kernel = kernel_id(r.name);
  record.correlation_id = r.correlation_id;
  record.start_ns = r.start_ns;
  record.end_ns = r.end_ns;
  std::memcpy(record.grid, r.grid, sizeof(record.grid));
  std::memcpy(record.block, r.block, sizeof(record.block));
  record.shared_memory = static_cast<int32_t>(r.shared_memory);
  record.registers = r.registers;
  record.device = r.device;
  record.stream = r.stream;
  g->launches.write_bytes(&record, sizeof(record));
  ++g->count;
}

// Each loaded module's functions and their code hashes (cubin_symbols.h), for the closing line.
void on_module_loaded(const void* data) {
  try {
    const auto* resource = static_cast<const CUpti_ResourceData*>(data);
    const auto* module = static_cast<const CUpti_ModuleResourceData*>(resource->resourceDescriptor);
    if (module == nullptr || module->pCubin == nullptr || module->cubinSize == 0) return;
    const std::vector<FunctionCode> functions = cubin_function_code(module->pCubin, module->cubinSize);
    std::lock_guard<std::mutex> lock(g->mutex);
    for (const FunctionCode& function : functions) g->codes[function.name].insert(function.hash);
  } catch (...) {
    log_error("a module's code hashes were not read: out of memory");
  }
}

void CUPTIAPI on_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (g == nullptr) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_MODULE_LOADED) on_module_loaded(data);
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) sampler_on_driver_api(cbid, static_cast<const CUpti_CallbackData*>(data));
}

// A kernel's code hash as 16 hex digits: its one hash, or, when modules of different code held a function
// of its name (a Triton kernel specialized twice), a hash over their sorted hashes; null when no loaded
// module held it.
std::string code_json(const std::string& name) {
  const auto it = g->codes.find(name);
  if (it == g->codes.end() || it->second.empty()) return "null";
  const std::vector<uint64_t> hashes(it->second.begin(), it->second.end());  // sorted: a std::set's order
  const uint64_t hash = hashes.size() == 1 ? hashes[0] : combined_code_hash(hashes);
  char text[24];
  std::snprintf(text, sizeof(text), "\"%016" PRIx64 "\"", hash);
  return text;
}

// The one subscriber CUPTI allows: module loads, so that each kernel's code can be hashed (the resource
// domain's MODULE_LOADED), and, when sampling, the launch entry points (launch_sampler.h). Without
// sampling there is no callback on any launch. `subscriber` is null when the subscription failed.
bool subscribe(CUpti_SubscriberHandle& subscriber) {
  subscriber = nullptr;
  if (!PROFILER_CUPTI(cuptiSubscribe(&subscriber, on_callback, nullptr))) {
    subscriber = nullptr;
    return false;
  }
  return PROFILER_CUPTI(
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED));
}

// The closing line's "unrecorded" member: per kernel id, the launches made with kernel records off
// (`by_name`: sampler_unrecorded, read before g->mutex is taken: a launch callback holding the sampler's
// lock may switch records, and CUPTI may deliver a buffer to write_record meanwhile).
std::string unrecorded_json(const std::unordered_map<std::string, uint64_t>& by_name) {
  std::string json = ",\"unrecorded\":[";
  uint64_t placed = 0;
  for (size_t id = 0; id < g->names.size(); ++id) {
    const auto it = by_name.find(g->names[id]);
    const uint64_t count = it != by_name.end() ? it->second : 0;
    placed += count;
    json += (id > 0 ? "," : "") + std::to_string(count);
  }
  uint64_t total = 0;
  for (const auto& [name, count] : by_name) total += count;
  if (total > placed) {
    log_error("%llu sampled-out launches belong to kernels that never got a record; the trace leaves them out",
              static_cast<unsigned long long>(total - placed));
  }
  return json + "]";
}

}  // namespace

bool trace_start(const Config& config) {
  const uint64_t t0 = now_ns();
  g_stats = config.stats;
  g = new State();
  if (!g->kernels.open(config.output)) return false;
  if (!g->launches.open(config.output + ".launches")) {
    g->kernels.discard();
    return false;
  }
  g->kernels.write_line("{\"accordo\":\"trace\",\"version\":2,\"pid\":" + std::to_string(getpid()) +
                        ",\"record_bytes\":" + std::to_string(sizeof(LaunchRecord)) + "}");
  g_sampling = config.sample_every > 1;
  CUpti_SubscriberHandle subscriber = nullptr;
  if (!subscribe(subscriber)) log_error("module loads are not seen: the trace holds no code hashes");
  if (g_sampling && (subscriber == nullptr || !sampler_start(subscriber, config.sample_first, config.sample_every))) {
    log_error("launches cannot be counted: every launch is recorded");
    g_sampling = false;
  }
  if (activity_start(write_record)) {
    g_start_ns = now_ns() - t0;
    return true;
  }
  g->launches.discard();
  g->kernels.discard();
  return false;
}

void trace_finish() {
  if (g == nullptr || !g->kernels.is_open()) return;
  const uint64_t t0 = now_ns();
  activity_flush();
  const uint64_t t1 = now_ns();
  const auto unrecorded = g_sampling ? sampler_unrecorded() : std::unordered_map<std::string, uint64_t>();
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    std::string closing = "{\"launches\":" + std::to_string(g->count) + ",\"code\":[";
    for (size_t id = 0; id < g->names.size(); ++id) closing += (id > 0 ? "," : "") + code_json(g->names[id]);
    closing += "]";
    if (g_sampling) closing += unrecorded_json(unrecorded);
    g->kernels.write_line(closing + "}");
  }
  // the launch records first: a published kernel table means both files are complete
  if (!g->launches.publish()) {
    g->kernels.discard();
    return;
  }
  g->kernels.publish();
  const uint64_t t2 = now_ns();
  if (g_stats) {
    const ActivityStats a = activity_stats();
    log_error("trace stats: set-up %.3f ms (first CUPTI call %.3f, register %.3f, enable %.3f), exit %.3f ms "
              "(flush %.3f, write %.3f); %llu kernel records in %llu buffers",
              ms(g_start_ns), ms(a.attribute_ns), ms(a.register_ns), ms(a.enable_ns), ms(t2 - t0), ms(t1 - t0),
              ms(t2 - t1), static_cast<unsigned long long>(a.records), static_cast<unsigned long long>(a.buffers));
    if (g_sampling) {
      const SamplerStats s = sampler_stats();
      log_error("trace sampling: %llu launches counted, %llu unrecorded; %llu switches of kernel records (%.3f ms)",
                static_cast<unsigned long long>(s.launches), static_cast<unsigned long long>(s.unrecorded),
                static_cast<unsigned long long>(s.toggles), ms(s.toggle_ns));
    }
  }
}

}  // namespace profiler

#include "trace.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "activity.h"
#include "json_out.h"
#include "log.h"
#include "names.h"

namespace accordo {

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
  std::string last_name;  // most records repeat the kernel of the record before
  uint32_t last_id = 0;
  uint64_t count = 0;
};

State* g = nullptr;  // leaked on purpose: must outlive static destructors at exit
bool g_stats = false;
uint64_t g_start_ns = 0;  // trace_start's own duration (steady_clock), for ACCORDO_STATS

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
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    g->kernels.write_line("{\"launches\":" + std::to_string(g->count) + "}");
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
  }
}

}  // namespace accordo

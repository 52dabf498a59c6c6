#include "trace.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

#include "activity.h"
#include "json_out.h"
#include "log.h"
#include "names.h"

namespace accordo {

namespace {

JsonlWriter* g_writer = nullptr;  // leaked on purpose: must outlive static destructors at exit
bool g_stats = false;
uint64_t g_start_ns = 0;  // trace_start's own duration (steady_clock), for ACCORDO_STATS

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

double ms(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

const std::string& demangled_name(const char* name) {
  static std::mutex mutex;
  static auto* cache = new std::unordered_map<std::string, std::string>();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache->find(name);
  if (it == cache->end()) it = cache->emplace(name, demangle(name)).first;
  return it->second;  // references into an unordered_map stay valid across inserts
}

void append_triple(std::string& line, const int32_t (&values)[3]) {
  line += '[';
  for (int i = 0; i < 3; ++i) {
    if (i > 0) line += ',';
    line += std::to_string(values[i]);
  }
  line += ']';
}

void write_record(const KernelRecord& r) {
  std::string line;
  line.reserve(256);
  line += "{\"corr\":";
  line += std::to_string(r.correlation_id);
  line += ",\"name\":";
  append_json_string(line, r.name);
  line += ",\"demangled\":";
  append_json_string(line, demangled_name(r.name));
  line += ",\"start\":";
  line += std::to_string(r.start_ns);
  line += ",\"end\":";
  line += std::to_string(r.end_ns);
  line += ",\"grid\":";
  append_triple(line, r.grid);
  line += ",\"block\":";
  append_triple(line, r.block);
  line += ",\"smem\":";
  line += std::to_string(r.shared_memory);
  line += ",\"regs\":";
  line += std::to_string(r.registers);
  line += ",\"device\":";
  line += std::to_string(r.device);
  line += ",\"stream\":";
  line += std::to_string(r.stream);
  line += '}';
  g_writer->write_line(line);
}

}  // namespace

bool trace_start(const Config& config) {
  const uint64_t t0 = now_ns();
  g_stats = config.stats;
  g_writer = new JsonlWriter();
  if (!g_writer->open(config.output)) return false;
  g_writer->write_line("{\"accordo\":\"trace\",\"version\":1,\"pid\":" + std::to_string(getpid()) + "}");
  if (activity_start(write_record)) {
    g_start_ns = now_ns() - t0;
    return true;
  }
  g_writer->discard();
  return false;
}

void trace_finish() {
  if (g_writer == nullptr || !g_writer->is_open()) return;
  const uint64_t t0 = now_ns();
  activity_flush();
  const uint64_t t1 = now_ns();
  g_writer->publish();
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

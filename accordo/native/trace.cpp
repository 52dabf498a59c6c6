#include "trace.h"

#include <unistd.h>

#include <mutex>
#include <string>
#include <unordered_map>

#include "activity.h"
#include "json_out.h"
#include "names.h"

namespace accordo {

namespace {

JsonlWriter* g_writer = nullptr;  // leaked on purpose: must outlive static destructors at exit

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
  g_writer = new JsonlWriter();
  if (!g_writer->open(config.output)) return false;
  g_writer->write_line("{\"accordo\":\"trace\",\"version\":1,\"pid\":" + std::to_string(getpid()) + "}");
  if (activity_start(write_record)) return true;
  g_writer->discard();
  return false;
}

void trace_finish() {
  if (g_writer == nullptr || !g_writer->is_open()) return;
  activity_flush();
  g_writer->publish();
}

}  // namespace accordo

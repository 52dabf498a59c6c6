#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "log.h"

namespace profiler {

namespace {

constexpr const char* kSettingsVariable = "INTELLIPERF_PROFILER_SETTINGS";
const char* const kKeys[] = {
    "mode",    "output",       "kernel",         "max_bytes",   "capture_budget", "dedup",     "restore", "quiesce",
    "kernels", "sass_metrics", "metrics_launch", "sass_launch", "metrics",        "cubin_dir", "stats",
    "sample_first", "sample_every"};

std::map<std::string, std::string> g_settings;

std::string setting(const char* name) {
  const auto found = g_settings.find(name);
  return found != g_settings.end() ? found->second : std::string();
}

// Reads the settings file into g_settings; false (with a message) when it is unset, unreadable or holds a
// line that is not `key=value` with a known key.
bool read_settings() {
  g_settings.clear();
  const char* path = std::getenv(kSettingsVariable);
  if (path == nullptr || *path == '\0') {
    log_error("%s is not set; the profiler is disabled", kSettingsVariable);
    return false;
  }
  std::ifstream in(path);
  if (!in) {
    log_error("cannot read the settings file %s (%s); the profiler is disabled", path, std::strerror(errno));
    return false;
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    const size_t equals = line.find('=');
    const std::string key = line.substr(0, equals);
    const bool known = std::any_of(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; });
    if (equals == std::string::npos || !known) {
      log_error("%s:%d is not a known `key=value` setting; the profiler is disabled", path, number);
      return false;
    }
    g_settings[key] = line.substr(equals + 1);
  }
  return true;
}

std::string expand_pid(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 1 < path.size() && path[i + 1] == 'p') {
      out += std::to_string(static_cast<long>(getpid()));
      ++i;
    } else {
      out += path[i];
    }
  }
  return out;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    if (end > start) items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
}

// A launch number: a non-negative integer, else `fallback` (with a message).
uint64_t launch_number(const char* name, uint64_t fallback) {
  const std::string text = setting(name);
  if (text.empty()) return fallback;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || text[0] == '-') {
    log_error("%s='%s' is not a launch number; using %llu", name, text.c_str(),
              static_cast<unsigned long long>(fallback));
    return fallback;
  }
  return value;
}

// A positive integer (a byte count, a launch count) into `value`; anything else keeps `value` (with a message).
void read_positive(const char* name, uint64_t& value) {
  const std::string text = setting(name);
  if (text.empty()) return;
  errno = 0;
  char* end = nullptr;
  const unsigned long long parsed = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || parsed == 0 || text[0] == '-') {
    log_error("%s='%s' is not a positive integer; using %llu", name, text.c_str(),
              static_cast<unsigned long long>(value));
    return;
  }
  value = parsed;
}

bool load_counters(Config& config) {
  config.kernels = split_commas(setting("kernels"));
  config.metrics = split_commas(setting("metrics"));
  config.sass_metrics = split_commas(setting("sass_metrics"));
  config.metrics_launch = launch_number("metrics_launch", 1);
  config.sass_launch = launch_number("sass_launch", 2);
  config.cubin_dir = setting("cubin_dir");
  if (config.kernels.empty()) {
    log_error("kernels is not set in counters mode; the profiler is disabled");
    return false;
  }
  if (config.cubin_dir.empty()) {
    log_error("cubin_dir is not set in counters mode; the profiler is disabled");
    return false;
  }
  if (config.metrics_launch != 0 && config.metrics_launch == config.sass_launch) {
    log_error("metrics_launch and sass_launch name the same launch; the profiler is disabled");
    return false;
  }
  return true;
}

}  // namespace

bool load_config(Config& config) {
  config = Config{};
  if (!read_settings()) return false;
  const std::string mode = setting("mode");
  if (mode.empty() || mode == "trace") {
    config.mode = Mode::Trace;
  } else if (mode == "capture") {
    config.mode = Mode::Capture;
  } else if (mode == "time") {
    config.mode = Mode::Time;
  } else if (mode == "counters") {
    config.mode = Mode::Counters;
  } else {
    log_error("mode must be 'trace', 'capture', 'time' or 'counters', not '%s'; the profiler is disabled",
              mode.c_str());
    return false;
  }

  config.output = expand_pid(setting("output"));
  if (config.output.empty()) {
    log_error("output is not set; the profiler is disabled");
    return false;
  }

  if (config.mode == Mode::Counters) return load_counters(config);
  if (config.mode != Mode::Trace) {
    config.kernel_regex = setting("kernel");
    if (config.kernel_regex.empty()) {
      log_error("kernel is not set in %s mode; the profiler is disabled",
                config.mode == Mode::Capture ? "capture" : "time");
      return false;
    }
  }
  if (config.mode == Mode::Capture) {
    read_positive("max_bytes", config.max_bytes);
    read_positive("capture_budget", config.capture_budget);
    config.restore_dir = setting("restore");
    const std::string dedupe = setting("dedup");
    if (dedupe == "0") {
      config.dedupe = false;
    } else if (!dedupe.empty() && dedupe != "1") {
      log_error("dedup='%s' is neither 0 nor 1; using 1", dedupe.c_str());
    }
  }
  if (config.mode == Mode::Trace) {
    read_positive("sample_first", config.sample_first);
    read_positive("sample_every", config.sample_every);
  }
  config.stats = setting("stats") == "1";
  const std::string quiesce = setting("quiesce");
  if (quiesce == "1") {
    config.quiesce = true;
  } else if (!quiesce.empty() && quiesce != "0") {
    log_error("quiesce='%s' is neither 0 nor 1; using 0", quiesce.c_str());
  }
  return true;
}

}  // namespace profiler

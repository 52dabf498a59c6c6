#include "config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "log.h"

namespace accordo {

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
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
  const std::string text = env(name);
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

// A positive byte count into `value`; anything else keeps `value` (with a message).
void read_bytes(const char* name, uint64_t& value) {
  const std::string text = env(name);
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
  config.kernels = split_commas(env("ACCORDO_KERNELS"));
  config.metrics = split_commas(env("ACCORDO_METRICS"));
  config.sass_metrics = split_commas(env("ACCORDO_SASS_METRICS"));
  config.metrics_launch = launch_number("ACCORDO_METRICS_LAUNCH", 1);
  config.sass_launch = launch_number("ACCORDO_SASS_LAUNCH", 2);
  config.cubin_dir = env("ACCORDO_CUBIN_DIR");
  if (config.kernels.empty()) {
    log_error("ACCORDO_KERNELS is not set in counters mode; Accordo is disabled");
    return false;
  }
  if (config.cubin_dir.empty()) {
    log_error("ACCORDO_CUBIN_DIR is not set in counters mode; Accordo is disabled");
    return false;
  }
  if (config.metrics_launch != 0 && config.metrics_launch == config.sass_launch) {
    log_error("ACCORDO_METRICS_LAUNCH and ACCORDO_SASS_LAUNCH name the same launch; Accordo is disabled");
    return false;
  }
  return true;
}

}  // namespace

bool load_config(Config& config) {
  config = Config{};
  const std::string mode = env("ACCORDO_MODE");
  if (mode.empty() || mode == "trace") {
    config.mode = Mode::Trace;
  } else if (mode == "capture") {
    config.mode = Mode::Capture;
  } else if (mode == "time") {
    config.mode = Mode::Time;
  } else if (mode == "counters") {
    config.mode = Mode::Counters;
  } else {
    log_error("ACCORDO_MODE must be 'trace', 'capture', 'time' or 'counters', not '%s'; Accordo is disabled",
              mode.c_str());
    return false;
  }

  config.output = expand_pid(env("ACCORDO_OUTPUT"));
  if (config.output.empty()) {
    log_error("ACCORDO_OUTPUT is not set; Accordo is disabled");
    return false;
  }

  if (config.mode == Mode::Counters) return load_counters(config);
  if (config.mode != Mode::Trace) {
    config.kernel_regex = env("ACCORDO_KERNEL");
    if (config.kernel_regex.empty()) {
      log_error("ACCORDO_KERNEL is not set in %s mode; Accordo is disabled",
                config.mode == Mode::Capture ? "capture" : "time");
      return false;
    }
  }
  if (config.mode == Mode::Capture) {
    read_bytes("ACCORDO_MAX_BYTES", config.max_bytes);
    read_bytes("ACCORDO_CAPTURE_BUDGET", config.capture_budget);
    config.restore_dir = env("ACCORDO_RESTORE");
    const std::string dedupe = env("ACCORDO_DEDUP");
    if (dedupe == "0") {
      config.dedupe = false;
    } else if (!dedupe.empty() && dedupe != "1") {
      log_error("ACCORDO_DEDUP='%s' is neither 0 nor 1; using 1", dedupe.c_str());
    }
  }
  config.stats = env("ACCORDO_STATS") == "1";
  const std::string quiesce = env("ACCORDO_QUIESCE");
  if (quiesce == "1") {
    config.quiesce = true;
  } else if (!quiesce.empty() && quiesce != "0") {
    log_error("ACCORDO_QUIESCE='%s' is neither 0 nor 1; using 0", quiesce.c_str());
  }
  return true;
}

}  // namespace accordo

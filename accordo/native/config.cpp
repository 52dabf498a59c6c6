#include "config.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

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
  } else {
    log_error("ACCORDO_MODE must be 'trace', 'capture' or 'time', not '%s'; Accordo is disabled", mode.c_str());
    return false;
  }

  config.output = expand_pid(env("ACCORDO_OUTPUT"));
  if (config.output.empty()) {
    log_error("ACCORDO_OUTPUT is not set; Accordo is disabled");
    return false;
  }

  if (config.mode != Mode::Trace) {
    config.kernel_regex = env("ACCORDO_KERNEL");
    if (config.kernel_regex.empty()) {
      log_error("ACCORDO_KERNEL is not set in %s mode; Accordo is disabled",
                config.mode == Mode::Capture ? "capture" : "time");
      return false;
    }
  }
  if (config.mode == Mode::Capture) {
    const std::string cap = env("ACCORDO_MAX_BYTES");
    if (!cap.empty()) {
      errno = 0;
      char* end = nullptr;
      const unsigned long long value = std::strtoull(cap.c_str(), &end, 10);
      if (errno != 0 || end == cap.c_str() || *end != '\0' || value == 0 || cap[0] == '-') {
        log_error("ACCORDO_MAX_BYTES='%s' is not a positive integer; using %llu", cap.c_str(),
                  static_cast<unsigned long long>(config.max_bytes));
      } else {
        config.max_bytes = value;
      }
    }
    const std::string dedupe = env("ACCORDO_DEDUP");
    if (dedupe == "0") {
      config.dedupe = false;
    } else if (!dedupe.empty() && dedupe != "1") {
      log_error("ACCORDO_DEDUP='%s' is neither 0 nor 1; using 1", dedupe.c_str());
    }
  }
  config.stats = env("ACCORDO_STATS") == "1";
  return true;
}

}  // namespace accordo

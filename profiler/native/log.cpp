#include "log.h"

#include <cstdarg>
#include <cstdio>

namespace profiler {

void log_error(const char* fmt, ...) {
  char message[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  std::fprintf(stderr, "intelliperf-profiler: %s\n", message);
}

std::string cupti_failure(const char* call, CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  return std::string(call) + " failed: " + text;
}

bool cupti_ok(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return true;
  log_error("%s", cupti_failure(call, result).c_str());
  return false;
}

}  // namespace profiler

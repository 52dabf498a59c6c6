#include "log.h"

#include <cstdarg>
#include <cstdio>

namespace accordo {

void log_error(const char* fmt, ...) {
  char message[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  std::fprintf(stderr, "accordo: %s\n", message);
}

bool cupti_ok(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return true;
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  log_error("%s failed: %s", call, text);
  return false;
}

}  // namespace accordo

// Diagnostics: every message goes to stderr prefixed "intelliperf-profiler: ", and every CUPTI call is checked.
#pragma once

#include <cupti.h>

#include <string>

namespace profiler {

// printf-style message to stderr: "intelliperf-profiler: <message>\n". Never throws.
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Returns true on CUPTI_SUCCESS; otherwise prints "intelliperf-profiler: <call> failed: <cuptiGetResultString>".
bool cupti_ok(CUptiResult result, const char* call);

// "<call> failed: <cuptiGetResultString>", for a caller that reports the failure itself.
std::string cupti_failure(const char* call, CUptiResult result);

}  // namespace profiler

#define PROFILER_CUPTI(call) ::profiler::cupti_ok((call), #call)

// In a function returning std::string (a failure's description, "" for none): returns the failure of `call`.
#define PROFILER_CUPTI_OR_RETURN(call)                                            \
  do {                                                                           \
    const CUptiResult profiler_result_ = (call);                                  \
    if (profiler_result_ != CUPTI_SUCCESS) return ::profiler::cupti_failure(#call, profiler_result_); \
  } while (0)

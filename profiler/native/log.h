// Diagnostics: every message goes to stderr prefixed "accordo: ", and every CUPTI call is checked.
#pragma once

#include <cupti.h>

#include <string>

namespace accordo {

// printf-style message to stderr: "accordo: <message>\n". Never throws.
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Returns true on CUPTI_SUCCESS; otherwise prints "accordo: <call> failed: <cuptiGetResultString>".
bool cupti_ok(CUptiResult result, const char* call);

// "<call> failed: <cuptiGetResultString>", for a caller that reports the failure itself.
std::string cupti_failure(const char* call, CUptiResult result);

}  // namespace accordo

#define ACCORDO_CUPTI(call) ::accordo::cupti_ok((call), #call)

// In a function returning std::string (a failure's description, "" for none): returns the failure of `call`.
#define ACCORDO_CUPTI_OR_RETURN(call)                                            \
  do {                                                                           \
    const CUptiResult accordo_result_ = (call);                                  \
    if (accordo_result_ != CUPTI_SUCCESS) return ::accordo::cupti_failure(#call, accordo_result_); \
  } while (0)

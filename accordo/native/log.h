// Diagnostics: every message goes to stderr prefixed "accordo: ", and every CUPTI call is checked.
#pragma once

#include <cupti.h>

namespace accordo {

// printf-style message to stderr: "accordo: <message>\n". Never throws.
void log_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Returns true on CUPTI_SUCCESS; otherwise prints "accordo: <call> failed: <cuptiGetResultString>".
bool cupti_ok(CUptiResult result, const char* call);

}  // namespace accordo

#define ACCORDO_CUPTI(call) ::accordo::cupti_ok((call), #call)

// Trace mode: every kernel launch's activity record becomes one JSON line.
#pragma once

#include "config.h"

namespace accordo {

bool trace_start(const Config& config);  // opens "<output>.tmp", writes the header line, enables activity
void trace_finish();                     // flushes activity, then publishes <output>

}  // namespace accordo

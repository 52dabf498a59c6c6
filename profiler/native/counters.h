// Counters mode: IntelliPerf's counter pass. For each kernel named in the `kernels` setting, its kernel-level
// hardware metrics on one launch (range_profiler.h) and its per-instruction SASS metrics on another
// (sass_metrics.h), plus the cubin of every module that holds one of those kernels, for disassembly.
#pragma once

#include "config.h"

namespace profiler {

bool counters_start(const Config& config);  // opens the file, subscribes the launch and module callbacks
void counters_finish();                     // disables the profilers, publishes the file

}  // namespace profiler

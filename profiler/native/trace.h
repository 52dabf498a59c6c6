// Trace mode: a kernel table (JSON Lines, one line per kernel) and one fixed-size binary record per kernel
// execution (FORMAT.md). Nothing is formatted or parsed per launch.
#pragma once

#include "config.h"

namespace profiler {

// Opens "<output>.tmp" and "<output>.launches.tmp", writes the header line, enables activity.
bool trace_start(const Config& config);
// Flushes activity, writes the closing line (the launch count), then publishes <output>.launches and <output>.
void trace_finish();

}  // namespace profiler

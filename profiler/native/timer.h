// Time mode: each launch of a kernel whose name matches the `kernel` setting is timed by a pair of CUDA events
// recorded on its stream just before and just after it (from the launch callbacks), behind a gate that
// holds the stream until the launch is queued (gate.h), as a CUDA-event benchmark harness times a kernel. No CUPTI activity is enabled: activity records made some
// memory-bound kernels 3-5 us slower per launch on an H100 (benchmarks/speedup_probe.py), which moved
// their measured speedups by several percent. Each timed launch becomes one JSON line, with what it asked
// the GPU to do (grid, block, shared memory, argument bytes) beside its time.
#pragma once

#include "config.h"

namespace profiler {

bool timer_start(const Config& config);  // opens "<output>.tmp", subscribes the launch callbacks
void timer_finish();                     // waits for the last events, then publishes <output>

}  // namespace profiler

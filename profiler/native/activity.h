// CUPTI activity API: CONCURRENT_KERNEL records (which do not serialize kernels) delivered to a sink.
#pragma once

#include <cstdint>

namespace profiler {

struct KernelRecord {
  uint32_t correlation_id;
  const char* name;  // mangled; valid only during the sink call
  uint64_t start_ns;
  uint64_t end_ns;
  int32_t grid[3];
  int32_t block[3];
  int64_t shared_memory;  // static + dynamic bytes
  uint32_t registers;
  uint32_t device;
  uint32_t stream;
};

// Called from CUPTI's buffer-completed callback (a CUPTI thread, or the thread that flushes).
using KernelSink = void (*)(const KernelRecord& record);

// Registers the buffer callbacks and enables CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL. Activity buffers are
// fresh anonymous mappings (zero pages that cost nothing until CUPTI writes records into them), and CUPTI
// is told so (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER): it would otherwise clear every 8 MiB
// buffer it is given, 5 ms at the first kernel. CUPTI's device-side buffers are 1 MiB instead of 3.2 MB
// (activity.cpp says why).
bool activity_start(KernelSink sink);

// Switches kernel records on or off after activity_start (cuptiActivityEnable / cuptiActivityDisable of
// CONCURRENT_KERNEL): a launch made while they are off gets no record. False (with a message) on failure.
bool activity_kernels(bool on);

// Forces delivery of every pending record to the sink (cuptiActivityFlushAll with FLUSH_FORCED),
// then reports dropped records, if any.
void activity_flush();

// Where activity_start's and activity_flush's time went (steady_clock), for the `stats` setting.
struct ActivityStats {
  uint64_t attribute_ns = 0;  // the first CUPTI call, so CUPTI's own initialization is in here
  uint64_t register_ns = 0;   // cuptiActivityRegisterCallbacks
  uint64_t enable_ns = 0;     // cuptiActivityEnable(CONCURRENT_KERNEL)
  uint64_t flush_ns = 0;      // cuptiActivityFlushAll(FLUSH_FORCED), records delivered included
  uint64_t buffers = 0;       // activity buffers CUPTI asked for
  uint64_t records = 0;       // kernel records delivered to the sink
};
ActivityStats activity_stats();

}  // namespace profiler

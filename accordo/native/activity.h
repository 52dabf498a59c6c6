// CUPTI activity API: CONCURRENT_KERNEL records (which do not serialize kernels) delivered to a sink.
#pragma once

#include <cstdint>

namespace accordo {

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

// Registers the buffer callbacks and enables CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL.
bool activity_start(KernelSink sink);

// Forces delivery of every pending record to the sink (cuptiActivityFlushAll with FLUSH_FORCED),
// then reports dropped records, if any.
void activity_flush();

}  // namespace accordo

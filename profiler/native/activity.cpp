#include "activity.h"

#include <cupti.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "log.h"

namespace profiler {

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;

// CUPTI's device-side record buffers (CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE), three allocated when a
// context is created and more on demand, up to 250 per context. CUPTI's default, 3.2 MB (about 100,000
// records), made each traced run 11-17 ms slower on an H100 than 1 MiB (about 32,000 records in flight per
// buffer) did (benchmarks/trace_overhead.py; 256 KiB and 64 KiB were no faster). 0 keeps CUPTI's default.
#ifndef PROFILER_DEVICE_BUFFER_BYTES
#define PROFILER_DEVICE_BUFFER_BYTES 1048576
#endif
constexpr size_t kDeviceBufferBytes = PROFILER_DEVICE_BUFFER_BYTES;

std::atomic<KernelSink> g_sink{nullptr};
std::atomic<uint64_t> g_dropped{0};
std::atomic<uint64_t> g_buffers{0};
std::atomic<uint64_t> g_records{0};
ActivityStats g_times;  // written by activity_start and activity_flush only

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Page-aligned, zero-filled by the kernel on first touch: only the pages CUPTI writes cost anything.
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = mmap(nullptr, kBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    log_error("cannot map an activity buffer of %zu bytes: %s", kBufferBytes, std::strerror(errno));
    *buffer = nullptr;
    *size = 0;
  } else {
    *buffer = static_cast<uint8_t*>(p);
    *size = kBufferBytes;
    g_buffers.fetch_add(1, std::memory_order_relaxed);
  }
  *max_records = 0;
}

void deliver(const CUpti_Activity* activity, KernelSink sink) {
  if (activity->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && activity->kind != CUPTI_ACTIVITY_KIND_KERNEL) {
    return;
  }
  // Fields read here sit at the same offsets in every CUpti_ActivityKernel version since 4.
  const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
  KernelRecord record{};
  record.correlation_id = k->correlationId;
  record.name = k->name != nullptr ? k->name : "";
  record.start_ns = k->start;
  record.end_ns = k->end;
  record.grid[0] = k->gridX, record.grid[1] = k->gridY, record.grid[2] = k->gridZ;
  record.block[0] = k->blockX, record.block[1] = k->blockY, record.block[2] = k->blockZ;
  record.shared_memory = static_cast<int64_t>(k->staticSharedMemory) + k->dynamicSharedMemory;
  record.registers = k->registersPerThread;
  record.device = k->deviceId;
  record.stream = k->streamId;
  sink(record);
  g_records.fetch_add(1, std::memory_order_relaxed);
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                               size_t valid_size) {
  if (buffer == nullptr) return;
  const KernelSink sink = g_sink.load();
  if (sink != nullptr && valid_size > 0) {
    CUpti_Activity* record = nullptr;
    while (true) {
      const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_size, &record);
      if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
      if (!PROFILER_CUPTI(status)) break;
      try {
        deliver(record, sink);
      } catch (...) {
        log_error("dropping an activity record: out of memory");
      }
    }
    size_t dropped = 0;
    if (PROFILER_CUPTI(cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped)) && dropped > 0) {
      g_dropped += dropped;
    }
  }
  if (munmap(buffer, kBufferBytes) != 0) log_error("cannot unmap an activity buffer: %s", std::strerror(errno));
}

}  // namespace

bool activity_start(KernelSink sink) {
  g_sink.store(sink);
  const uint64_t t0 = now_ns();
  // Our buffers come zeroed (fresh mappings): CUPTI need not clear them. If CUPTI refuses the attribute,
  // it clears them itself, which costs time but changes no record.
  uint8_t zeroed = 1;
  size_t zeroed_size = sizeof(zeroed);
  PROFILER_CUPTI(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &zeroed_size, &zeroed));
  if (kDeviceBufferBytes > 0) {
    size_t device_bytes = kDeviceBufferBytes;
    size_t device_size = sizeof(device_bytes);
    PROFILER_CUPTI(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &device_size, &device_bytes));
  }
  const uint64_t t1 = now_ns();
  const bool registered = PROFILER_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
  const uint64_t t2 = now_ns();
  const bool enabled = registered && PROFILER_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  const uint64_t t3 = now_ns();
  g_times.attribute_ns = t1 - t0;
  g_times.register_ns = t2 - t1;
  g_times.enable_ns = t3 - t2;
  return enabled;
}

bool activity_kernels(bool on) {
  return on ? PROFILER_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
            : PROFILER_CUPTI(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

void activity_flush() {
  const uint64_t t0 = now_ns();
  PROFILER_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  g_times.flush_ns = now_ns() - t0;
  const uint64_t dropped = g_dropped.load();
  if (dropped > 0) {
    log_error("CUPTI dropped %llu kernel activity records; the trace misses those launches",
              static_cast<unsigned long long>(dropped));
  }
}

ActivityStats activity_stats() {
  ActivityStats stats = g_times;
  stats.buffers = g_buffers.load();
  stats.records = g_records.load();
  return stats;
}

}  // namespace profiler

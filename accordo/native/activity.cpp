#include "activity.h"

#include <cupti.h>

#include <atomic>
#include <cstdlib>

#include "log.h"

namespace accordo {

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;
constexpr size_t kBufferAlign = 8;

std::atomic<KernelSink> g_sink{nullptr};
std::atomic<uint64_t> g_dropped{0};

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
  if (*buffer == nullptr) log_error("cannot allocate an activity buffer of %zu bytes", kBufferBytes);
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
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                               size_t valid_size) {
  const KernelSink sink = g_sink.load();
  if (sink != nullptr && valid_size > 0) {
    CUpti_Activity* record = nullptr;
    while (true) {
      const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_size, &record);
      if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
      if (!ACCORDO_CUPTI(status)) break;
      try {
        deliver(record, sink);
      } catch (...) {
        log_error("dropping an activity record: out of memory");
      }
    }
    size_t dropped = 0;
    if (ACCORDO_CUPTI(cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped)) && dropped > 0) {
      g_dropped += dropped;
    }
  }
  std::free(buffer);
}

}  // namespace

bool activity_start(KernelSink sink) {
  g_sink.store(sink);
  if (!ACCORDO_CUPTI(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed))) return false;
  return ACCORDO_CUPTI(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
}

void activity_flush() {
  ACCORDO_CUPTI(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  const uint64_t dropped = g_dropped.load();
  if (dropped > 0) {
    log_error("CUPTI dropped %llu kernel activity records; the trace misses those launches",
              static_cast<unsigned long long>(dropped));
  }
}

}  // namespace accordo

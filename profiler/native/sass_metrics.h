// Per-instruction counters of one kernel launch at a time, through CUPTI's SASS metrics: the launched
// function's code is patched to count, per instruction, what each metric names (executions, threads,
// memory sectors and wavefronts computed from the addresses), then unpatched.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

namespace profiler {

// One instruction of the profiled function: its offset from the function's start and each metric's count
// (in the order of SassMetrics::metrics()).
struct SassInstruction {
  uint32_t pc_offset = 0;
  std::vector<uint64_t> values;
};

struct SassResult {
  uint64_t cubin_crc = 0;
  std::vector<SassInstruction> instructions;  // by pc_offset
};

class SassMetrics {
 public:
  // Looks the metrics up for `device` (its ordinal) and configures collection. A metric the device does not
  // have is left out (unsupported() lists it). Returns "" on success, else why it failed.
  std::string init(int device, const std::vector<std::string>& metrics);

  // Around one launch, on the launching thread: begin() before the launch call (the function is loaded
  // first, so that lazy module loading cannot keep it from being patched), end() after it: waits for the
  // kernel, reads the counts of `function_name`'s instructions and unpatches.
  std::string begin(CUcontext ctx, CUfunction function);
  std::string end(CUcontext ctx, const std::string& function_name, SassResult& result);

  const std::vector<std::string>& metrics() const { return metrics_; }
  const std::vector<std::string>& unsupported() const { return unsupported_; }

 private:
  std::vector<std::string> metrics_;
  std::vector<uint64_t> ids_;  // CUPTI's metric ids, in the order of metrics_
  std::vector<std::string> unsupported_;
  bool enabled_ = false;
};

}  // namespace profiler

// Kernel-level hardware metrics of one kernel launch at a time, through CUPTI's range profiler: every
// replay pass the metrics need is run on that one launch (kernel replay, CUPTI saves and restores the
// memory the kernel writes), and each launch is its own range (auto range).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct CUpti_Profiler_Host_Object;
struct CUpti_RangeProfiler_Object;

namespace profiler {

class RangeProfiler {
 public:
  // Initializes CUPTI's profiler for `ctx` on `device` (its ordinal), builds the configuration of
  // `metrics` and enables the range profiler on `ctx`. A metric the device does not support is left out
  // (unsupported() lists it) rather than failing the others. Returns "" on success, else why it failed.
  std::string init(CUcontext ctx, int device, const std::vector<std::string>& metrics);

  // Around one launch in that context, on the launching thread: begin() before the launch call, end()
  // after it.
  std::string begin();
  std::string end(std::vector<double>& values);  // values in the order of metrics()

  void finish();  // disables the range profiler; safe to call more than once

  const std::vector<std::string>& metrics() const { return metrics_; }
  const std::vector<std::string>& unsupported() const { return unsupported_; }
  const std::string& chip() const { return chip_; }
  size_t passes() const { return passes_; }

 private:
  std::string add_metrics(const std::vector<uint8_t>& availability, const std::vector<std::string>& wanted);

  std::string chip_;
  std::vector<std::string> metrics_;
  std::vector<std::string> unsupported_;
  std::vector<const char*> names_;  // into metrics_
  std::vector<uint8_t> config_;
  std::vector<uint8_t> counter_data_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_RangeProfiler_Object* range_ = nullptr;
  size_t passes_ = 0;
  bool started_ = false;
};

}  // namespace profiler

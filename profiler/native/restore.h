// Capture mode's restore (restore=<folder>): before each captured launch, the bytes another run
// (the reference) had in the launch's buffers are copied into this run's buffers, so the kernel runs on
// the reference's own inputs for that launch. The folder holds one file per launch and parameter,
// `<seq>-<param>.bin` (seq: 0, 1, 2, ... over the captured launches, as in the capture file), written by
// the Python driver from the reference's capture; a launch or parameter without a file is left as it is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace profiler {

class Restorer {
 public:
  explicit Restorer(std::string folder) : folder_(std::move(folder)) {}

  // Copies the reference's bytes for (seq, param) to [start, start + nbytes) on the device, synchronously.
  // Returns "" when copied or when the folder has no such file; otherwise why not (a size that is not
  // `nbytes`, an unreadable file, a failed copy).
  std::string restore(uint64_t seq, uint32_t param, uint64_t start, uint64_t nbytes);

 private:
  std::string folder_;
  std::vector<uint8_t> staging_;
};

}  // namespace profiler

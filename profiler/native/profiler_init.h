// CUPTI's profiler, initialized once per process before the range profiler or SASS metrics is used.
#pragma once

#include <string>

namespace profiler {

// Initializes CUPTI's profiler and gives the chip name of the device with this ordinal ("GH100"); returns
// "" on success, else why it failed.
std::string init_profiler(int device, std::string& chip);

}  // namespace profiler

// Capture mode: for each launch of a kernel whose name matches the `kernel` setting, snapshot every device
// allocation its pointer parameters point into, before and after the kernel, into the capture file.
#pragma once

#include "config.h"

namespace profiler {

bool capture_start(const Config& config);  // opens the file, subscribes the launch callbacks, enables timing
void capture_finish();                     // flushes timing, writes the END record, closes the file

}  // namespace profiler

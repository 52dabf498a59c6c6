// Sampled launches for trace mode (FORMAT.md, "Sampled launches"). Kernel activity costs about 2 us a
// launch on an H200 (benchmarks/trace_overhead.py: 72,000 empty launches ran 130-150 ms longer), and a
// program of tens of thousands of launches pays it on every one. With sampling, a driver-API callback
// counts each kernel's launches and keeps kernel records on only while a sampled launch is being made:
// each kernel's first `first` launches and every `every`-th after. The others are counted as unrecorded,
// per kernel, and the reader estimates their time at the mean of the kernel's records.
//
// Launches the callback does not count (cooperative and legacy launches, CUDA graphs) switch records on,
// so they are recorded as before; a launch into a stream that is being captured into a graph is not an
// execution and is not counted.
#pragma once

#include <cupti.h>

#include <cstdint>
#include <string>
#include <unordered_map>

namespace profiler {

// Enables, on `subscriber`, the driver-API callbacks of every kernel launch entry point; later launches are
// sampled as the header says. False (with a message) on failure.
bool sampler_start(CUpti_SubscriberHandle subscriber, uint64_t first, uint64_t every);

// The subscriber's driver-API callback, for the sampler's callback ids (others are ignored).
void sampler_on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData* info);

// Per mangled name, the launches that were made while kernel records were off.
std::unordered_map<std::string, uint64_t> sampler_unrecorded();

struct SamplerStats {
  uint64_t launches = 0;     // counted launches
  uint64_t unrecorded = 0;   // of them, made with kernel records off
  uint64_t toggles = 0;      // kernel records switched on or off
  uint64_t toggle_ns = 0;    // the time the switches took (steady_clock)
};
SamplerStats sampler_stats();

}  // namespace profiler

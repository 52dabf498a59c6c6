// A gate: a one-thread kernel queued on a stream ahead of a timed launch that holds the stream until the
// host says the launch is queued behind it. Without it, a start event recorded on an idle GPU would time
// the host's own work too (the launch call, the first launch's lazy module load): 20-30 us on the first
// launch of each example app, which moved 5-launch speedups by up to 16% (benchmarks/validate.py on an
// H100). A CUDA-event harness holds the GPU the same way before it times anything. The launched function
// must be loaded before its gate is queued (launch.h, load_function): a lazy load inside the launch call
// would wait for the gate, and the gate for the launch call.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace profiler {

constexpr double kGateTimeoutS = 1.0;  // the gate kernel's own limit (gate.cpp's PTX)

// Queues the gate on `stream` of `context` (loading the gate's module into the context on first use; a
// context where that failed keeps failing with the same description). On success sets `ticket`, to pass to
// gate_release; otherwise returns a description of the failure.
std::string gate_hold(CUcontext context, CUstream stream, uint32_t& ticket);

// Opens the gate of `ticket` in `context`. A gate also opens by itself after one second (kGateTimeoutS).
void gate_release(CUcontext context, uint32_t ticket);

// Forgets `context` (about to be destroyed: its module and mapped flags go with it). A later context with
// the same handle loads the gate afresh.
void gate_forget(CUcontext context);

}  // namespace profiler

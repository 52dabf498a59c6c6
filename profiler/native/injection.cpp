// Entry point: CUDA loads this library for CUDA_INJECTION64_PATH and calls InitializeInjection once
// during cuInit. Results are written by an atexit handler (exit() from main, or main returning).
#include <atomic>
#include <cstdlib>
#include <exception>

#include "capture.h"
#include "config.h"
#include "counters.h"
#include "log.h"
#include "timer.h"
#include "trace.h"

namespace {

// One lifecycle for every native mode: `start` once the configuration is read (false: set-up failed and
// the application runs untouched), `finish` from the exit handler, to write what was gathered.
struct Lifecycle {
  bool (*start)(const profiler::Config&);
  void (*finish)();
};

Lifecycle lifecycle_of(profiler::Mode mode) {
  switch (mode) {
    case profiler::Mode::Capture:
      return {profiler::capture_start, profiler::capture_finish};
    case profiler::Mode::Time:
      return {profiler::timer_start, profiler::timer_finish};
    case profiler::Mode::Counters:
      return {profiler::counters_start, profiler::counters_finish};
    case profiler::Mode::Trace:
      break;
  }
  return {profiler::trace_start, profiler::trace_finish};
}

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_finished{false};
void (*g_finish)() = nullptr;

void finish_at_exit() {
  if (g_finished.exchange(true) || g_finish == nullptr) return;
  try {
    g_finish();
  } catch (const std::exception& e) {
    profiler::log_error("writing the results failed: %s", e.what());
  } catch (...) {
    profiler::log_error("writing the results failed");
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (g_initialized.exchange(true)) return 1;
  try {
    profiler::Config config;
    if (!profiler::load_config(config)) return 1;  // already explained on stderr; the app runs untouched
    const Lifecycle mode = lifecycle_of(config.mode);
    if (!mode.start(config)) {
      profiler::log_error("setup failed; the application runs without Accordo");
      return 1;
    }
    g_finish = mode.finish;
    if (std::atexit(finish_at_exit) != 0) profiler::log_error("cannot register the exit handler");
  } catch (const std::exception& e) {
    profiler::log_error("initialization failed: %s", e.what());
  } catch (...) {
    profiler::log_error("initialization failed");
  }
  return 1;
}

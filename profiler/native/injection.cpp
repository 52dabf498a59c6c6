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
  bool (*start)(const accordo::Config&);
  void (*finish)();
};

Lifecycle lifecycle_of(accordo::Mode mode) {
  switch (mode) {
    case accordo::Mode::Capture:
      return {accordo::capture_start, accordo::capture_finish};
    case accordo::Mode::Time:
      return {accordo::timer_start, accordo::timer_finish};
    case accordo::Mode::Counters:
      return {accordo::counters_start, accordo::counters_finish};
    case accordo::Mode::Trace:
      break;
  }
  return {accordo::trace_start, accordo::trace_finish};
}

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_finished{false};
void (*g_finish)() = nullptr;

void finish_at_exit() {
  if (g_finished.exchange(true) || g_finish == nullptr) return;
  try {
    g_finish();
  } catch (const std::exception& e) {
    accordo::log_error("writing the results failed: %s", e.what());
  } catch (...) {
    accordo::log_error("writing the results failed");
  }
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  if (g_initialized.exchange(true)) return 1;
  try {
    accordo::Config config;
    if (!accordo::load_config(config)) return 1;  // already explained on stderr; the app runs untouched
    const Lifecycle mode = lifecycle_of(config.mode);
    if (!mode.start(config)) {
      accordo::log_error("setup failed; the application runs without Accordo");
      return 1;
    }
    g_finish = mode.finish;
    if (std::atexit(finish_at_exit) != 0) accordo::log_error("cannot register the exit handler");
  } catch (const std::exception& e) {
    accordo::log_error("initialization failed: %s", e.what());
  } catch (...) {
    accordo::log_error("initialization failed");
  }
  return 1;
}

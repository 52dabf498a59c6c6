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

std::atomic<bool> g_initialized{false};
std::atomic<bool> g_finished{false};
accordo::Mode g_mode = accordo::Mode::Trace;

void finish_at_exit() {
  if (g_finished.exchange(true)) return;
  try {
    switch (g_mode) {
      case accordo::Mode::Capture:
        accordo::capture_finish();
        break;
      case accordo::Mode::Time:
        accordo::timer_finish();
        break;
      case accordo::Mode::Trace:
        accordo::trace_finish();
        break;
      case accordo::Mode::Counters:
        accordo::counters_finish();
        break;
    }
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
    g_mode = config.mode;
    bool started = false;
    switch (config.mode) {
      case accordo::Mode::Capture:
        started = accordo::capture_start(config);
        break;
      case accordo::Mode::Time:
        started = accordo::timer_start(config);
        break;
      case accordo::Mode::Trace:
        started = accordo::trace_start(config);
        break;
      case accordo::Mode::Counters:
        started = accordo::counters_start(config);
        break;
    }
    if (!started) {
      accordo::log_error("setup failed; the application runs without Accordo");
      return 1;
    }
    if (std::atexit(finish_at_exit) != 0) accordo::log_error("cannot register the exit handler");
  } catch (const std::exception& e) {
    accordo::log_error("initialization failed: %s", e.what());
  } catch (...) {
    accordo::log_error("initialization failed");
  }
  return 1;
}

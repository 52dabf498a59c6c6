// Configuration from the environment (read once, in InitializeInjection).
//   ACCORDO_MODE       trace (default) | capture | time
//   ACCORDO_OUTPUT     output path (required); "%p" in it is replaced by the process id
//   ACCORDO_KERNEL     capture, time: ECMAScript regex, searched in the mangled and the demangled name
//   ACCORDO_MAX_BYTES  capture: cap on the bytes copied per allocation snapshot (default 2 GiB)
//   ACCORDO_DEDUP      capture: 1 (default) writes SAME records for unchanged snapshots, 0 never
//   ACCORDO_STATS      1 prints where Accordo's time went on stderr at exit (default 0): trace mode, CUPTI's
//                      set-up and the final flush; capture mode, the snapshots
#pragma once

#include <cstdint>
#include <string>

namespace accordo {

enum class Mode { Trace, Capture, Time };

struct Config {
  Mode mode = Mode::Trace;
  std::string output;
  std::string kernel_regex;
  uint64_t max_bytes = uint64_t{2} << 30;
  bool dedupe = true;
  bool stats = false;
};

// Fills `config` from the environment. On an unusable configuration prints why and returns false.
bool load_config(Config& config);

}  // namespace accordo

// Configuration, read once in InitializeInjection from the settings file that INTELLIPERF_PROFILER_SETTINGS
// names: one `key=value` per line (the value runs to the end of the line; blank lines are skipped). Every
// mode is set up through that one variable, so a program sees the same environment whether it is traced,
// captured, timed or profiled (the mode is in the file, not in a variable of its own).
//   mode           trace (default) | capture | time | counters
//   output         output path (required); "%p" in it is replaced by the process id
//   kernel         capture, time: ECMAScript regex, searched in the mangled and the demangled name
//   max_bytes      capture: cap on the bytes copied per allocation snapshot (default 2 GiB)
//   capture_budget capture: bound on the snapshot bytes a capture writes (default 8 GiB); a launch whose
//                  snapshots could pass it gets an ERROR record starting "capture budget" and no snapshots,
//                  and so does every later launch
//   dedup          capture: 1 (default) writes SAME records for unchanged snapshots, 0 never
//   restore        capture: folder of another run's input bytes per launch and parameter, copied into each
//                  launch's buffers before it runs (restore.h); unset: none
//   quiesce        time: 1 synchronizes the context and resets the persisting-L2 lines before each timed
//                  launch (the judge's timing: no other work overlaps it, nothing kept in L2 on purpose);
//                  0 (default) leaves the program's own concurrency alone
//   kernels        counters: comma-separated mangled names of the kernels to profile (exact names)
//   metrics        counters: comma-separated range-profiler metrics (kernel-level)
//   sass_metrics   counters: comma-separated SASS metrics (per instruction)
//   metrics_launch, sass_launch  counters: which launch of each kernel (1-based; 0 never) gets the
//                  kernel-level metrics (default 1) and the SASS metrics (default 2)
//   cubin_dir      counters: existing folder where each module that holds a profiled kernel is saved as
//                  <crc>.cubin
//   sample_first, sample_every  trace: with sample_every > 1, each kernel's first sample_first launches
//                  (default 1000) and every sample_every-th after get a kernel record, the others are only
//                  counted (FORMAT.md, "Sampled launches"); sample_every=1 (default) records every launch
//                  and counts nothing
//   stats          1 prints where the profiler's time went on stderr at exit (default 0): trace mode,
//                  CUPTI's set-up and the final flush; capture mode, the snapshots
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace profiler {

enum class Mode { Trace, Capture, Time, Counters };

struct Config {
  Mode mode = Mode::Trace;
  std::string output;
  std::string kernel_regex;
  uint64_t max_bytes = uint64_t{2} << 30;
  uint64_t capture_budget = uint64_t{8} << 30;
  bool dedupe = true;
  std::string restore_dir;
  uint64_t sample_first = 1000;
  uint64_t sample_every = 1;
  bool stats = false;
  bool quiesce = false;
  std::vector<std::string> kernels;
  std::vector<std::string> metrics;
  std::vector<std::string> sass_metrics;
  uint64_t metrics_launch = 1;
  uint64_t sass_launch = 2;
  std::string cubin_dir;
};

// Fills `config` from the settings file. On an unusable configuration prints why and returns false.
bool load_config(Config& config);

}  // namespace profiler

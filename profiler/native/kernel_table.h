// The kernels a process has launched, by mangled name: each one's demangled name, whether the `kernel` setting
// matches it, and how many of its launches Accordo has handled. Shared by capture mode and time mode.
#pragma once

#include <cstdint>
#include <regex>
#include <string>
#include <unordered_map>

namespace profiler {

struct KernelEntry {
  std::string name;  // mangled
  std::string demangled;
  bool matched = false;
  uint64_t next_index = 0;
};

class KernelTable {
 public:
  // Compiles `pattern` (ECMAScript). On failure returns the message to report; otherwise "".
  std::string set_pattern(const std::string& pattern);

  // The entry of `name`, made on first sight. Entries never move: references stay valid. Not thread-safe.
  KernelEntry& entry(const char* name);

 private:
  std::regex regex_;
  std::unordered_map<std::string, KernelEntry> kernels_;
};

}  // namespace profiler

#include "kernel_table.h"

#include "names.h"

namespace profiler {

std::string KernelTable::set_pattern(const std::string& pattern) {
  try {
    regex_ = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return "kernel='" + pattern + "' is not a valid regex: " + e.what();
  }
  return std::string();
}

KernelEntry& KernelTable::entry(const char* name) {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  KernelEntry entry;
  entry.name = name;
  entry.demangled = demangle(name);
  entry.matched = std::regex_search(entry.name, regex_) || std::regex_search(entry.demangled, regex_);
  return kernels_.emplace(name, std::move(entry)).first->second;
}

}  // namespace profiler

#include "names.h"

#include <cxxabi.h>

#include <cstdlib>

namespace profiler {

std::string demangle(const char* name) {
  if (name == nullptr) return std::string();
  int status = 0;
  char* result = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || result == nullptr) {
    std::free(result);
    return std::string(name);
  }
  std::string out(result);
  std::free(result);
  return out;
}

}  // namespace profiler

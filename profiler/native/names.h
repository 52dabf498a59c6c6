// Kernel names: demangling with a fallback to the mangled name.
#pragma once

#include <string>

namespace profiler {

// abi::__cxa_demangle(name); the name itself when it is not a mangled C++ name (Triton, extern "C").
std::string demangle(const char* name);

}  // namespace profiler

// The kernels a loaded module holds, read from its cubin's ELF symbol table, so that capture mode can
// keep the module of a kernel it captures (a replay loads it again: accordo/replay.py), and each function's
// code hash, so that trace mode can say which kernels a change touched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace profiler {

// The names of the function symbols (STT_FUNC) of an ELF64 little-endian image; empty when `image` is
// not one (a fatbin, PTX) or its tables are out of bounds. Never reads outside [image, image + size).
std::vector<std::string> cubin_function_names(const void* image, size_t size);

struct FunctionCode {
  std::string name;  // from its section's name, ".text.<name>"
  uint64_t hash;     // a 64-bit hash of the section's bytes
};

// Each function's code hash: a 64-bit hash (FNV-1a's constants over 8-byte words) of the bytes of its own
// code section (`.text.<name>`), the machine code alone. Line tables, file paths, the other functions of the module and where the module was built
// live in other sections, so two builds of one source in different folders hash alike, and a change to
// one kernel changes that kernel's hash only. Empty when `image` is not an ELF64 little-endian image (a
// fatbin, PTX); never reads outside [image, image + size).
std::vector<FunctionCode> cubin_function_code(const void* image, size_t size);

// One hash for several (sorted) code hashes of one function name, by the same hash over their bytes.
uint64_t combined_code_hash(const std::vector<uint64_t>& sorted_hashes);

}  // namespace profiler

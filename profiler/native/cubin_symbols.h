// The kernels a loaded module holds, read from its cubin's ELF symbol table, so that capture mode can
// keep the module of a kernel it captures (a replay loads it again: accordo/replay.py).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace accordo {

// The names of the function symbols (STT_FUNC) of an ELF64 little-endian image; empty when `image` is
// not one (a fatbin, PTX) or its tables are out of bounds. Never reads outside [image, image + size).
std::vector<std::string> cubin_function_names(const void* image, size_t size);

}  // namespace accordo

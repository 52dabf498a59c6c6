#include "cubin_symbols.h"

#include <elf.h>

#include <cstdint>
#include <cstring>

namespace profiler {

namespace {

// A copy of the T at `offset`, or false when it does not fit in the image.
template <typename T>
bool read_at(const uint8_t* image, size_t size, uint64_t offset, T& out) {
  if (offset > size || sizeof(T) > size - offset) return false;
  std::memcpy(&out, image + offset, sizeof(T));
  return true;
}

bool elf64_header(const uint8_t* image, size_t size, Elf64_Ehdr& header) {
  if (image == nullptr || !read_at(image, size, 0, header)) return false;
  return std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_ident[EI_CLASS] == ELFCLASS64 &&
         header.e_ident[EI_DATA] == ELFDATA2LSB && header.e_shentsize == sizeof(Elf64_Shdr);
}

// FNV-1a's constants over 8-byte words (then the tail's bytes), with a shift that folds the high bits
// back: a module's functions are hashed when it loads, inside the traced run, at several GB/s.
uint64_t code_hash(const uint8_t* bytes, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ULL ^ size;
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, sizeof(word));
    hash = (hash ^ word) * 0x100000001b3ULL;
    hash ^= hash >> 29;
  }
  for (; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

}  // namespace

std::vector<FunctionCode> cubin_function_code(const void* data, size_t size) {
  std::vector<FunctionCode> functions;
  const auto* image = static_cast<const uint8_t*>(data);
  Elf64_Ehdr header;
  if (!elf64_header(image, size, header)) return functions;
  Elf64_Shdr names;
  if (!read_at(image, size, header.e_shoff + uint64_t{header.e_shstrndx} * sizeof(Elf64_Shdr), names)) {
    return functions;
  }
  if (names.sh_offset > size || names.sh_size > size - names.sh_offset) return functions;
  const char* strings = reinterpret_cast<const char*>(image + names.sh_offset);
  constexpr char kPrefix[] = ".text.";
  constexpr size_t kPrefixLength = sizeof(kPrefix) - 1;
  for (uint64_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr section;
    if (!read_at(image, size, header.e_shoff + i * sizeof(Elf64_Shdr), section)) return functions;
    if (section.sh_type != SHT_PROGBITS || section.sh_name >= names.sh_size) continue;
    const size_t limit = names.sh_size - section.sh_name;
    const size_t length = strnlen(strings + section.sh_name, limit);
    if (length == limit || length <= kPrefixLength) continue;
    if (std::strncmp(strings + section.sh_name, kPrefix, kPrefixLength) != 0) continue;
    if (section.sh_offset > size || section.sh_size > size - section.sh_offset) return functions;
    functions.push_back({std::string(strings + section.sh_name + kPrefixLength, length - kPrefixLength),
                         code_hash(image + section.sh_offset, section.sh_size)});
  }
  return functions;
}

uint64_t combined_code_hash(const std::vector<uint64_t>& sorted_hashes) {
  return code_hash(reinterpret_cast<const uint8_t*>(sorted_hashes.data()), sorted_hashes.size() * sizeof(uint64_t));
}

std::vector<std::string> cubin_function_names(const void* data, size_t size) {
  std::vector<std::string> names;
  const auto* image = static_cast<const uint8_t*>(data);
  Elf64_Ehdr header;
  if (!elf64_header(image, size, header)) return names;
  for (uint64_t i = 0; i < header.e_shnum; ++i) {
    Elf64_Shdr symtab;
    if (!read_at(image, size, header.e_shoff + i * sizeof(Elf64_Shdr), symtab)) return names;
    if (symtab.sh_type != SHT_SYMTAB || symtab.sh_entsize != sizeof(Elf64_Sym)) continue;
    Elf64_Shdr strtab;
    if (!read_at(image, size, header.e_shoff + uint64_t{symtab.sh_link} * sizeof(Elf64_Shdr), strtab)) return names;
    if (strtab.sh_offset > size || strtab.sh_size > size - strtab.sh_offset) return names;
    const char* strings = reinterpret_cast<const char*>(image + strtab.sh_offset);
    for (uint64_t k = 0; k < symtab.sh_size / sizeof(Elf64_Sym); ++k) {
      Elf64_Sym symbol;
      if (!read_at(image, size, symtab.sh_offset + k * sizeof(Elf64_Sym), symbol)) return names;
      if (ELF64_ST_TYPE(symbol.st_info) != STT_FUNC || symbol.st_name >= strtab.sh_size) continue;
      const size_t limit = strtab.sh_size - symbol.st_name;
      const size_t length = strnlen(strings + symbol.st_name, limit);
      if (length == 0 || length == limit) continue;  // empty, or not NUL-terminated inside the table
      names.emplace_back(strings + symbol.st_name, length);
    }
  }
  return names;
}

}  // namespace profiler

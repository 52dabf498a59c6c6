#include "cubin_symbols.h"

#include <elf.h>

#include <cstdint>
#include <cstring>

namespace accordo {

namespace {

// A copy of the T at `offset`, or false when it does not fit in the image.
template <typename T>
bool read_at(const uint8_t* image, size_t size, uint64_t offset, T& out) {
  if (offset > size || sizeof(T) > size - offset) return false;
  std::memcpy(&out, image + offset, sizeof(T));
  return true;
}

}  // namespace

std::vector<std::string> cubin_function_names(const void* data, size_t size) {
  std::vector<std::string> names;
  const auto* image = static_cast<const uint8_t*>(data);
  Elf64_Ehdr header;
  if (image == nullptr || !read_at(image, size, 0, header)) return names;
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_shentsize != sizeof(Elf64_Shdr)) {
    return names;
  }
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

}  // namespace accordo

#include "restore.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "dispatch.h"

namespace profiler {

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};

}  // namespace

std::string Restorer::restore(uint64_t seq, uint32_t param, uint64_t start, uint64_t nbytes) {
  const std::string path = folder_ + "/" + std::to_string(seq) + "-" + std::to_string(param) + ".bin";
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) {
    if (errno == ENOENT) return std::string();
    return "cannot open " + path + ": " + std::strerror(errno);
  }
  if (std::fseek(file.get(), 0, SEEK_END) != 0) return "cannot seek in " + path + ": " + std::strerror(errno);
  const long size = std::ftell(file.get());
  if (size < 0) return "cannot tell the size of " + path + ": " + std::strerror(errno);
  if (static_cast<uint64_t>(size) != nbytes) {
    return "the reference's parameter " + std::to_string(param) + " holds " + std::to_string(size) +
           " bytes, this run's " + std::to_string(nbytes);
  }
  if (std::fseek(file.get(), 0, SEEK_SET) != 0) return "cannot seek in " + path + ": " + std::strerror(errno);
  constexpr size_t kChunk = size_t{64} << 20;
  staging_.resize(static_cast<size_t>(std::min<uint64_t>(nbytes, kChunk)));
  for (uint64_t done = 0; done < nbytes;) {
    const size_t count = static_cast<size_t>(std::min<uint64_t>(nbytes - done, staging_.size()));
    if (std::fread(staging_.data(), 1, count, file.get()) != count) {
      return "cannot read " + path + ": " + (std::ferror(file.get()) ? std::strerror(errno) : "it ended early");
    }
    const CUresult copied = drv::memcpy_htod(static_cast<CUdeviceptr>(start + done), staging_.data(), count);
    if (copied != CUDA_SUCCESS) return drv::describe("cuMemcpyHtoD of the reference's bytes", copied);
    done += count;
  }
  return std::string();
}

}  // namespace profiler

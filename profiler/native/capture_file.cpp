#include "capture_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "log.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the capture format is little-endian");

namespace profiler {

namespace {

enum RecordType : uint32_t { kLaunch = 1, kBuffer = 2, kTime = 3, kError = 4, kEnd = 5, kSame = 6, kShape = 7, kModule = 8 };

template <typename T>
void put(std::vector<uint8_t>& out, T value) {
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& text) {
  put<uint32_t>(out, static_cast<uint32_t>(text.size()));
  out.insert(out.end(), text.begin(), text.end());
}

}  // namespace

FileBytes::~FileBytes() {
  if (munmap(map_, map_bytes_) != 0) log_error("munmap of the capture file failed: %s", std::strerror(errno));
}

bool CaptureFile::open(const std::string& path) {
  path_ = path;
  file_ = std::fopen(path.c_str(), "w+b");  // readable too: read_back() maps earlier records
  if (file_ == nullptr) {
    log_error("cannot open %s for writing: %s", path.c_str(), std::strerror(errno));
    return false;
  }
  std::setvbuf(file_, nullptr, _IOFBF, size_t{1} << 20);
  const char magic[8] = {'A', 'C', 'C', 'O', 'R', 'D', 'O', '1'};
  const uint32_t version = 1;
  const uint32_t reserved = 0;
  raw(magic, sizeof(magic));
  raw(&version, sizeof(version));
  raw(&reserved, sizeof(reserved));
  flush();
  return ok();
}

void CaptureFile::raw(const void* data, size_t nbytes) {
  if (!ok() || nbytes == 0) return;
  if (std::fwrite(data, 1, nbytes, file_) != nbytes) {
    failed_ = true;
    log_error("writing %s failed: %s; no further captures are recorded", path_.c_str(), std::strerror(errno));
    return;
  }
  position_ += nbytes;
}

void CaptureFile::record_header(uint32_t type, uint64_t payload_bytes) {
  const uint32_t reserved = 0;
  raw(&type, sizeof(type));
  raw(&reserved, sizeof(reserved));
  raw(&payload_bytes, sizeof(payload_bytes));
}

void CaptureFile::write_launch(const LaunchInfo& launch) {
  std::vector<uint8_t> payload;
  payload.reserve(256);
  put<uint64_t>(payload, launch.launch_index);
  put<uint64_t>(payload, launch.seq);
  put_string(payload, launch.name);
  put_string(payload, launch.demangled);
  put<uint32_t>(payload, static_cast<uint32_t>(launch.params.size()));
  for (const ParamInfo& p : launch.params) {
    put<uint32_t>(payload, p.index);
    put<uint32_t>(payload, p.offset);
    put<uint32_t>(payload, p.size);
    put<uint32_t>(payload, static_cast<uint32_t>(p.kind));
    if (p.kind == ParamKind::Scalar) {
      payload.insert(payload.end(), p.bytes.begin(), p.bytes.end());
    } else if (p.kind == ParamKind::Pointer) {
      put<uint64_t>(payload, p.value);
      put<uint64_t>(payload, p.alloc_base);
      put<uint64_t>(payload, p.alloc_size);
    }
  }
  record_header(kLaunch, payload.size());
  raw(payload.data(), payload.size());
}

uint64_t CaptureFile::begin_buffer(const RecordRef& record, uint64_t base, uint64_t nbytes) {
  record_header(kBuffer, 8 + 4 + 4 + 8 + 8 + nbytes);
  raw(&record.seq, sizeof(record.seq));
  raw(&record.param_index, sizeof(record.param_index));
  raw(&record.phase, sizeof(record.phase));
  raw(&base, sizeof(base));
  raw(&nbytes, sizeof(nbytes));
  return position_;
}

void CaptureFile::write_same(const RecordRef& record, uint64_t base, uint64_t nbytes, const RecordRef& same) {
  record_header(kSame, 48);
  raw(&record.seq, sizeof(record.seq));
  raw(&record.param_index, sizeof(record.param_index));
  raw(&record.phase, sizeof(record.phase));
  raw(&base, sizeof(base));
  raw(&nbytes, sizeof(nbytes));
  raw(&same.seq, sizeof(same.seq));
  raw(&same.param_index, sizeof(same.param_index));
  raw(&same.phase, sizeof(same.phase));
}

std::unique_ptr<FileBytes> CaptureFile::read_back(uint64_t offset, uint64_t nbytes, std::string& problem) {
  if (!ok()) {
    problem = "the file is not writable";
    return nullptr;
  }
  if (nbytes == 0 || offset > position_ || nbytes > position_ - offset) {
    problem = "bytes " + std::to_string(offset) + "+" + std::to_string(nbytes) + " are not in the file";
    return nullptr;
  }
  flush();
  if (!ok()) {
    problem = "flushing failed";
    return nullptr;
  }
  const long page_size = sysconf(_SC_PAGESIZE);
  const uint64_t page = page_size > 0 ? static_cast<uint64_t>(page_size) : 4096;
  const uint64_t aligned = offset - offset % page;
  const size_t skip = static_cast<size_t>(offset - aligned);
  const size_t length = static_cast<size_t>(nbytes) + skip;
  void* map = mmap(nullptr, length, PROT_READ, MAP_SHARED, fileno(file_), static_cast<off_t>(aligned));
  if (map == MAP_FAILED) {
    problem = std::string("mmap failed: ") + std::strerror(errno);
    return nullptr;
  }
  return std::make_unique<FileBytes>(map, length, skip);
}

void CaptureFile::write_data(const void* data, size_t nbytes) { raw(data, nbytes); }

void CaptureFile::write_zeros(size_t nbytes) {
  static const uint8_t zeros[4096] = {};
  while (nbytes > 0 && ok()) {
    const size_t n = nbytes < sizeof(zeros) ? nbytes : sizeof(zeros);
    raw(zeros, n);
    nbytes -= n;
  }
}

void CaptureFile::write_shape(uint64_t seq, const LaunchShape& shape) {
  std::vector<uint8_t> out;
  put<uint64_t>(out, seq);
  for (uint32_t v : shape.grid) put<uint32_t>(out, v);
  for (uint32_t v : shape.block) put<uint32_t>(out, v);
  put<uint32_t>(out, shape.dynamic_shared);
  put<uint32_t>(out, shape.flags);
  put<uint64_t>(out, shape.stream);
  put<uint64_t>(out, shape.persisting_l2);
  put<uint64_t>(out, shape.module);
  record_header(kShape, out.size());
  raw(out.data(), out.size());
}

void CaptureFile::write_module(uint64_t module_index, const std::vector<std::string>& names, const void* image,
                               size_t nbytes) {
  std::vector<uint8_t> head;
  put<uint64_t>(head, module_index);
  put<uint32_t>(head, static_cast<uint32_t>(names.size()));
  for (const std::string& name : names) put_string(head, name);
  put<uint64_t>(head, nbytes);
  record_header(kModule, head.size() + nbytes);
  raw(head.data(), head.size());
  raw(image, nbytes);
}

void CaptureFile::write_time(uint64_t seq, uint64_t start_ns, uint64_t end_ns) {
  record_header(kTime, 24);
  raw(&seq, sizeof(seq));
  raw(&start_ns, sizeof(start_ns));
  raw(&end_ns, sizeof(end_ns));
}

void CaptureFile::write_error(uint64_t seq, const std::string& message) {
  const uint32_t length = static_cast<uint32_t>(message.size());
  record_header(kError, 8 + 4 + uint64_t{length});
  raw(&seq, sizeof(seq));
  raw(&length, sizeof(length));
  raw(message.data(), message.size());
}

void CaptureFile::flush() {
  if (ok() && std::fflush(file_) != 0) {
    failed_ = true;
    log_error("writing %s failed: %s; no further captures are recorded", path_.c_str(), std::strerror(errno));
  }
}

void CaptureFile::finish() {
  if (file_ == nullptr) return;
  record_header(kEnd, 0);
  flush();
  if (std::fclose(file_) != 0 && !failed_) log_error("closing %s failed: %s", path_.c_str(), std::strerror(errno));
  file_ = nullptr;
}

}  // namespace profiler

// The binary capture file (format: FORMAT.md). Not thread-safe: the caller serializes access.
// Write failures are reported once on stderr; afterwards every write is a no-op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace profiler {

enum class ParamKind : uint32_t { Scalar = 0, Pointer = 1, Unavailable = 2 };

struct ParamInfo {
  uint32_t index = 0;
  uint32_t offset = 0;
  uint32_t size = 0;
  ParamKind kind = ParamKind::Scalar;
  std::vector<uint8_t> bytes;  // Scalar: the `size` raw bytes
  uint64_t value = 0;          // Pointer: the pointer, its allocation's base and size
  uint64_t alloc_base = 0;
  uint64_t alloc_size = 0;
};

struct LaunchInfo {
  uint64_t launch_index = 0;  // per kernel name: 0, 1, 2, ...
  uint64_t seq = 0;           // per file: 0, 1, 2, ... (the key of BUFFER, TIME and ERROR records)
  std::string name;
  std::string demangled;
  std::vector<ParamInfo> params;
};

// How a launch was made (SHAPE record): its dimensions, stream and the module its kernel came from.
struct LaunchShape {
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t dynamic_shared = 0;
  uint32_t flags = 0;  // kShapeGraphCapture | kShapePerThread
  uint64_t stream = 0;
  uint64_t persisting_l2 = ~uint64_t{0};  // cuCtxGetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE); ~0 unknown
  uint64_t module = ~uint64_t{0};         // index of the MODULE record holding the kernel; ~0 none
};
inline constexpr uint32_t kShapeGraphCapture = 1;  // the stream was being captured into a CUDA graph
inline constexpr uint32_t kShapePerThread = 2;     // a _ptsz launch (stream 0: the per-thread stream)

// Names a BUFFER or SAME record: the launch, the parameter, the phase (0 before, 1 after the kernel).
struct RecordRef {
  uint64_t seq = 0;
  uint32_t param_index = 0;
  uint32_t phase = 0;
};

// Bytes already written to the capture file, mapped read-only; unmapped when destroyed.
class FileBytes {
 public:
  FileBytes(void* map, size_t map_bytes, size_t skip) : map_(map), map_bytes_(map_bytes), skip_(skip) {}
  ~FileBytes();
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  const uint8_t* data() const { return static_cast<const uint8_t*>(map_) + skip_; }
  size_t size() const { return map_bytes_ - skip_; }

 private:
  void* map_;
  size_t map_bytes_;
  size_t skip_;
};

class CaptureFile {
 public:
  static constexpr uint64_t kNoLaunch = ~uint64_t{0};  // ERROR record not tied to a launch

  bool open(const std::string& path);
  bool ok() const { return file_ != nullptr && !failed_; }

  void write_launch(const LaunchInfo& launch);
  // Writes a BUFFER record header; the caller then supplies exactly `nbytes` via write_data() and
  // write_zeros(). Returns the file offset of the first data byte.
  uint64_t begin_buffer(const RecordRef& record, uint64_t base, uint64_t nbytes);
  void write_data(const void* data, size_t nbytes);
  void write_zeros(size_t nbytes);
  // A SAME record: `record`'s nbytes from `base` equal the bytes of the earlier record `same`.
  void write_same(const RecordRef& record, uint64_t base, uint64_t nbytes, const RecordRef& same);
  // The `nbytes` written at `offset` (flushes first); nullptr, with `problem` set, when they cannot be
  // mapped (the output is not a regular file, or mmap fails).
  std::unique_ptr<FileBytes> read_back(uint64_t offset, uint64_t nbytes, std::string& problem);
  void write_shape(uint64_t seq, const LaunchShape& shape);
  // A MODULE record: a loaded cubin holding the kernels `names` (those the `kernel` setting matches).
  void write_module(uint64_t module_index, const std::vector<std::string>& names, const void* image, size_t nbytes);
  void write_time(uint64_t seq, uint64_t start_ns, uint64_t end_ns);
  void write_error(uint64_t seq, const std::string& message);
  void flush();
  void finish();  // END record, close

 private:
  void record_header(uint32_t type, uint64_t payload_bytes);
  void raw(const void* data, size_t nbytes);

  std::FILE* file_ = nullptr;
  std::string path_;
  bool failed_ = false;
  uint64_t position_ = 0;  // bytes written so far
};

}  // namespace profiler

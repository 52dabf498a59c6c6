// The binary capture file (format: FORMAT.md). Not thread-safe: the caller serializes access.
// Write failures are reported once on stderr; afterwards every write is a no-op.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace accordo {

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

class CaptureFile {
 public:
  static constexpr uint64_t kNoLaunch = ~uint64_t{0};  // ERROR record not tied to a launch

  bool open(const std::string& path);
  bool ok() const { return file_ != nullptr && !failed_; }

  void write_launch(const LaunchInfo& launch);
  // Writes a BUFFER record header; the caller then supplies exactly `nbytes` via write_data().
  void begin_buffer(uint64_t seq, uint32_t param_index, uint32_t phase, uint64_t base, uint64_t nbytes);
  void write_data(const void* data, size_t nbytes);
  void write_zeros(size_t nbytes);
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
};

}  // namespace accordo

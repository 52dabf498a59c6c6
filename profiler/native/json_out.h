// JSON Lines output: string escaping and a writer that publishes the file atomically.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace profiler {

// Appends `text` as a JSON string literal (quotes included). Control characters are escaped,
// valid UTF-8 is kept, and bytes that are not valid UTF-8 become U+FFFD.
void append_json_string(std::string& out, std::string_view text);

// Writes lines (or raw bytes) to "<path>.tmp"; publish() renames it to <path>, so that a file at <path> is
// always complete. Thread-safe.
class JsonlWriter {
 public:
  bool open(const std::string& path);
  void write_line(const std::string& line);  // `line` without the trailing newline
  void write_bytes(const void* data, size_t size);
  bool publish();                            // flush, close, rename; false (with a message) on failure
  void discard();                            // close and delete the temporary file
  bool is_open() const { return file_ != nullptr; }

 private:
  bool append(const void* data, size_t size);  // under mutex_; false once a write failed
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::string path_;
  std::string tmp_path_;
  bool failed_ = false;
};

}  // namespace profiler

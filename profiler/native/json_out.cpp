#include "json_out.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "log.h"

namespace profiler {

namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 if it is not valid.
size_t utf8_sequence_length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  size_t length = 0;
  uint32_t min_code = 0;
  uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, code = lead & 0x1F, min_code = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, code = lead & 0x0F, min_code = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, code = lead & 0x07, min_code = 0x10000;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    const unsigned char next = byte(i + k);
    if ((next & 0xC0) != 0x80) return 0;
    code = (code << 6) | (next & 0x3F);
  }
  if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  static const char hex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7F) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xF];
      }
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      const size_t length = utf8_sequence_length(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.data() + i, length);
        i += length;
      }
    }
  }
  out += '"';
}

bool JsonlWriter::open(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  path_ = path;
  tmp_path_ = path + ".tmp";
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (file_ == nullptr) {
    log_error("cannot open %s for writing: %s", tmp_path_.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

void JsonlWriter::write_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (append(line.data(), line.size())) append("\n", 1);
}

void JsonlWriter::write_bytes(const void* data, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  append(data, size);
}

bool JsonlWriter::append(const void* data, size_t size) {
  if (file_ == nullptr || failed_) return false;
  if (std::fwrite(data, 1, size, file_) == size) return true;
  failed_ = true;
  log_error("writing %s failed: %s", tmp_path_.c_str(), std::strerror(errno));
  return false;
}

bool JsonlWriter::publish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return false;
  const bool flushed = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !flushed || !closed) {
    log_error("writing %s failed; the trace is incomplete and was not published", tmp_path_.c_str());
    return false;
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    log_error("cannot rename %s to %s: %s", tmp_path_.c_str(), path_.c_str(), std::strerror(errno));
    return false;
  }
  return true;
}

void JsonlWriter::discard() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_ == nullptr) return;
  std::fclose(file_);
  file_ = nullptr;
  std::remove(tmp_path_.c_str());
}

}  // namespace profiler

#include "snapshot.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "log.h"

namespace profiler {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

SnapshotWriter::SnapshotWriter(CaptureFile& file, DeviceCopier& device, const SnapshotOptions& options)
    : file_(file),
      device_(device),
      options_(options),
      dedupe_(options.dedupe),
      pool_(options.threads > 0 ? options.threads : WorkerPool::default_threads()) {
  options_.chunk_bytes = std::max<size_t>(options_.chunk_bytes, 1);
  options_.min_slice = std::max<size_t>(options_.min_slice, 1);
}

SnapshotWriter::~SnapshotWriter() {
  known_.clear();  // unmaps
  if (staging_ == nullptr) return;
  if (pinned_) device_.unpin(staging_);
  munmap(staging_, staging_bytes_);
}

bool SnapshotWriter::prepare_staging() {
  if (staging_ != nullptr) return true;
  const size_t bytes = 2 * options_.chunk_bytes;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    log_error("cannot allocate %zu bytes of staging memory: %s", bytes, std::strerror(errno));
    return false;
  }
  staging_ = static_cast<uint8_t*>(p);
  staging_bytes_ = bytes;
  const std::string problem = device_.pin(staging_, staging_bytes_);
  pinned_ = problem.empty();
  if (!pinned_) {
    log_error("cannot page-lock the staging memory (%s); device copies use pageable memory and run slower",
              problem.c_str());
  }
  return true;
}

bool SnapshotWriter::equal(const uint8_t* a, const uint8_t* b, size_t n) {
  const auto started = Clock::now();
  const size_t slices = std::min<size_t>(pool_.threads(), std::max<size_t>(1, n / options_.min_slice));
  bool same = true;
  if (slices <= 1) {
    same = std::memcmp(a, b, n) == 0;
  } else {
    std::atomic<bool> differs{false};
    pool_.run(slices, [&](size_t s) {
      if (differs.load(std::memory_order_relaxed)) return;
      const size_t lo = n / slices * s;
      const size_t hi = s + 1 == slices ? n : n / slices * (s + 1);
      if (std::memcmp(a + lo, b + lo, hi - lo) != 0) differs.store(true, std::memory_order_relaxed);
    });
    same = !differs.load();
  }
  stats_.compared_bytes += n;
  stats_.compare_s += since(started);
  return same;
}

void SnapshotWriter::forget_mapping(Known& known) {
  if (known.bytes == nullptr) return;
  mapped_bytes_ -= known.bytes->size();
  known.bytes.reset();
}

const FileBytes* SnapshotWriter::mapped(const Key& key, Known& known) {
  known.last_use = ++uses_;
  if (known.bytes != nullptr) return known.bytes.get();
  const auto started = Clock::now();
  // Make room: unmap the least recently used other mappings.
  while (mapped_bytes_ + key.second > options_.max_mapped_bytes) {
    Known* oldest = nullptr;
    for (auto& [k, v] : known_) {
      if (k != key && v.bytes != nullptr && (oldest == nullptr || v.last_use < oldest->last_use)) oldest = &v;
    }
    if (oldest == nullptr) break;
    forget_mapping(*oldest);
  }
  std::string problem;
  known.bytes = file_.read_back(known.data_offset, key.second, problem);
  stats_.map_s += since(started);
  if (known.bytes == nullptr) {
    if (file_.ok()) {
      log_error("cannot read the capture file back (%s); snapshots are written in full from now on",
                problem.c_str());
    }
    dedupe_ = false;
    known_.clear();
    mapped_bytes_ = 0;
    return nullptr;
  }
  mapped_bytes_ += known.bytes->size();
  return known.bytes.get();
}

void SnapshotWriter::write(uint64_t seq, uint32_t param_index, uint32_t phase, uint64_t start, uint64_t nbytes) {
  if (!file_.ok()) return;
  const auto started = Clock::now();
  ++stats_.snapshots;
  const RecordRef self{seq, param_index, phase};
  const Key key(start, nbytes);
  const bool tracked = dedupe_ && nbytes >= options_.min_dedupe_bytes;

  // The bytes last written for this range, to compare with.
  const FileBytes* old = nullptr;
  if (tracked) {
    const auto it = known_.find(key);
    if (it != known_.end()) old = mapped(key, it->second);
  }

  bool comparing = old != nullptr;
  uint64_t data_offset = 0;
  if (!comparing) data_offset = file_.begin_buffer(self, start, nbytes);

  std::string failure;
  uint64_t failed_at = 0;
  if (!prepare_staging()) failure = "no staging memory";
  const size_t chunk = options_.chunk_bytes;
  const uint64_t chunks = nbytes / chunk + (nbytes % chunk != 0 ? 1 : 0);
  const auto staging_of = [&](uint64_t i) { return staging_ + (i % 2) * chunk; };
  const auto length_of = [&](uint64_t i) { return static_cast<size_t>(std::min<uint64_t>(chunk, nbytes - i * chunk)); };
  const auto issue = [&](uint64_t i) {
    if (!failure.empty()) return;
    failure = device_.start_copy(staging_of(i), start + i * chunk, length_of(i));
    if (!failure.empty()) failed_at = i * chunk;
  };
  const auto write_bytes = [&](const uint8_t* data, size_t n) {
    const auto t = Clock::now();
    if (data != nullptr) {
      file_.write_data(data, n);
    } else {
      file_.write_zeros(n);
    }
    stats_.written_bytes += n;
    stats_.write_s += since(t);
  };

  if (chunks > 0) issue(0);
  for (uint64_t i = 0; i < chunks; ++i) {
    const uint64_t offset = i * chunk;
    const size_t n = length_of(i);
    bool copied = false;
    if (failure.empty()) {
      const auto t = Clock::now();
      failure = device_.wait_copy();
      stats_.wait_s += since(t);
      copied = failure.empty();
      if (copied) stats_.copied_bytes += n;
      if (!copied) failed_at = offset;
    }
    if (i + 1 < chunks) issue(i + 1);  // runs while this chunk is compared or written
    const uint8_t* data = copied ? staging_of(i) : nullptr;
    if (comparing) {
      if (data != nullptr && equal(old->data() + offset, data, n)) continue;
      comparing = false;  // differs: a BUFFER record after all, starting with the equal prefix
      data_offset = file_.begin_buffer(self, start, nbytes);
      write_bytes(old->data(), static_cast<size_t>(offset));
    }
    write_bytes(data, n);
  }

  if (comparing) {
    file_.write_same(self, start, nbytes, known_.at(key).ref);
    ++stats_.same;
  } else if (failure.empty()) {
    if (tracked && dedupe_) {
      Known& known = known_[key];
      forget_mapping(known);
      known.ref = self;
      known.data_offset = data_offset;
    }
  } else {
    const auto it = known_.find(key);
    if (it != known_.end()) {
      forget_mapping(it->second);
      known_.erase(it);
    }
    file_.write_error(seq, failure + " copying parameter " + std::to_string(param_index) +
                               (phase == 0 ? " before" : " after") + " the kernel; bytes from offset " +
                               std::to_string(failed_at) + " on are zeros");
  }
  stats_.total_s += since(started);
}

}  // namespace profiler

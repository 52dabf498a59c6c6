// Snapshots of device ranges into the capture file (BUFFER and SAME records, FORMAT.md).
//
// A snapshot is copied chunk by chunk through two page-locked staging buffers: the copy of chunk i + 1
// runs while chunk i is written or compared. With deduplication on, the writer remembers, per device
// range (start address and length), the BUFFER record that holds the last bytes written for it; the next
// snapshot of that range is compared, chunk by chunk and split over a few threads, with that record's
// bytes read back from the capture file (a read-only mmap, kept for later comparisons: no host copy is
// made, the page cache holds the bytes), and is written as a SAME record when every byte is equal. At the
// first difference the writer switches to a BUFFER record: the equal prefix comes from the old record,
// the rest from the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "capture_file.h"
#include "worker_pool.h"

namespace profiler {

// The device side of a snapshot: the library implements it with the CUDA driver (capture.cpp), the CPU
// tests with host memory. Methods return "" on success, else a message such as
// "cuMemcpyDtoHAsync failed: CUDA_ERROR_X (...)".
class DeviceCopier {
 public:
  virtual ~DeviceCopier() = default;
  // Makes [p, p + nbytes) page-locked so that copies into it run at full speed; unpin() undoes it.
  virtual std::string pin(void* p, size_t nbytes) = 0;
  virtual void unpin(void* p) = 0;
  // Starts copying nbytes from device address src to dst. At most one copy is outstanding.
  virtual std::string start_copy(void* dst, uint64_t src, size_t nbytes) = 0;
  // Waits for the copy started last.
  virtual std::string wait_copy() = 0;
};

struct SnapshotOptions {
  bool dedupe = true;
  size_t chunk_bytes = size_t{16} << 20;  // per staging buffer (two of them)
  unsigned threads = 0;                   // comparing threads, the caller included; 0: WorkerPool default
  size_t min_slice = size_t{1} << 20;     // a chunk is split into slices of at least this many bytes
  uint64_t min_dedupe_bytes = 64;         // smaller snapshots are always written in full
  // Read-back mappings kept between snapshots; beyond this total the least recently used are unmapped
  // (and mapped again when needed).
  uint64_t max_mapped_bytes = uint64_t{4} << 30;
};

// Where the time of the snapshots went (stats=1 prints it at exit).
struct SnapshotStats {
  uint64_t snapshots = 0;
  uint64_t same = 0;            // of them written as SAME records
  uint64_t copied_bytes = 0;    // from the device
  uint64_t written_bytes = 0;   // BUFFER data
  uint64_t compared_bytes = 0;  // against read-back bytes
  double total_s = 0;           // in write()
  double wait_s = 0;            // waiting for copies
  double compare_s = 0;
  double write_s = 0;
  double map_s = 0;  // mapping records back
};

class SnapshotWriter {
 public:
  SnapshotWriter(CaptureFile& file, DeviceCopier& device, const SnapshotOptions& options = {});
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Writes the snapshot of [start, start + nbytes) for launch `seq`: a BUFFER record, or a SAME record.
  // A failed copy leaves zeros from the failing chunk on and adds an ERROR record that says so.
  void write(uint64_t seq, uint32_t param_index, uint32_t phase, uint64_t start, uint64_t nbytes);

  const SnapshotStats& stats() const { return stats_; }

 private:
  using Key = std::pair<uint64_t, uint64_t>;  // (start, nbytes)
  struct Known {
    RecordRef ref;                     // the BUFFER record holding the range's last bytes
    uint64_t data_offset = 0;          // where its bytes start in the file
    std::unique_ptr<FileBytes> bytes;  // mapped on first comparison, then kept
    uint64_t last_use = 0;
  };

  bool prepare_staging();
  bool equal(const uint8_t* a, const uint8_t* b, size_t n);
  const FileBytes* mapped(const Key& key, Known& known);  // nullptr: dedupe is now off
  void forget_mapping(Known& known);

  CaptureFile& file_;
  DeviceCopier& device_;
  SnapshotOptions options_;
  bool dedupe_;
  WorkerPool pool_;
  uint8_t* staging_ = nullptr;  // 2 x chunk_bytes
  size_t staging_bytes_ = 0;
  bool pinned_ = false;
  std::map<Key, Known> known_;
  uint64_t mapped_bytes_ = 0;
  uint64_t uses_ = 0;
  SnapshotStats stats_;
};

}  // namespace profiler

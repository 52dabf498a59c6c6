// A few threads that split memory-bound loops (comparing snapshot chunks) between them. Threads start on
// first use; a pool that cannot start a thread runs with the ones it has (at least the caller).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace profiler {

class WorkerPool {
 public:
  // `threads` counts the calling thread: WorkerPool(1) runs everything in the caller.
  explicit WorkerPool(unsigned threads) : wanted_(threads > 0 ? threads - 1 : 0) {}
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Runs task(0), ..., task(n - 1) on the workers and the caller; returns when all have returned.
  // Not reentrant: one run() at a time. `task` must not throw.
  void run(size_t n, const std::function<void(size_t)>& task);

  unsigned threads() const { return wanted_ + 1; }

  // The calling thread plus min(7, CPUs available to the process - 1) workers.
  static unsigned default_threads();

 private:
  void start_workers();
  size_t work();  // runs tasks of the current run until none is left; returns how many it ran
  void loop();    // worker thread body

  const unsigned wanted_;
  bool started_ = false;
  std::vector<std::thread> workers_;

  std::mutex mutex_;
  std::condition_variable wake_;  // a new generation, or stop
  std::condition_variable done_;  // remaining_ reached 0
  const std::function<void(size_t)>* task_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  size_t remaining_ = 0;  // tasks not finished yet
  unsigned active_ = 0;   // workers inside work(): run() returns only when they have left it
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace profiler

#include "worker_pool.h"

#include <sched.h>

#include <algorithm>
#include <system_error>

#include "log.h"

namespace profiler {

unsigned WorkerPool::default_threads() {
  unsigned cpus = std::thread::hardware_concurrency();
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cpus = static_cast<unsigned>(CPU_COUNT(&set));
  return std::clamp(cpus, 1u, 8u);  // memory bandwidth, not cores, limits these loops
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::start_workers() {
  started_ = true;
  for (unsigned i = 0; i < wanted_; ++i) {
    try {
      workers_.emplace_back([this] { loop(); });
    } catch (const std::system_error& e) {
      log_error("cannot start a worker thread (%s); comparing with %zu", e.what(), workers_.size() + 1);
      break;
    }
  }
}

size_t WorkerPool::work() {
  size_t finished = 0;
  for (size_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) {
    (*task_)(i);
    ++finished;
  }
  return finished;
}

void WorkerPool::loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    const size_t finished = work();
    std::lock_guard<std::mutex> lock(mutex_);
    remaining_ -= finished;
    --active_;
    if (remaining_ == 0 && active_ == 0) done_.notify_all();
  }
}

void WorkerPool::run(size_t n, const std::function<void(size_t)>& task) {
  if (n == 0) return;
  if (!started_) start_workers();
  if (n == 1 || workers_.empty()) {
    for (size_t i = 0; i < n; ++i) task(i);
    return;
  }
  {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return active_ == 0; });  // a late worker of the previous run reads count_
    task_ = &task;
    count_ = n;
    next_.store(0);
    remaining_ = n;
    ++generation_;
  }
  wake_.notify_all();
  const size_t finished = work();
  std::unique_lock<std::mutex> lock(mutex_);
  remaining_ -= finished;
  done_.wait(lock, [&] { return remaining_ == 0 && active_ == 0; });
  task_ = nullptr;
}

}  // namespace profiler

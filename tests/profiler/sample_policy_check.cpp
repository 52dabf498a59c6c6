// Drives profiler/native/sample_policy.h through scripted launch sequences and prints what happened as one
// JSON object per line (tests/profiler/test_sample_policy.py reads them). No GPU, no CUPTI.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "sample_policy.h"

using profiler::LaunchFate;
using profiler::SamplePolicy;

namespace {

struct Tally {
  std::vector<uint64_t> sampled, recorded, unrecorded, uncounted;
  uint64_t switches = 0;
  uint64_t queries = 0;  // capture queries asked (each a driver call in the tracer)
  explicit Tally(size_t kernels) : sampled(kernels), recorded(kernels), unrecorded(kernels), uncounted(kernels) {}
};

std::string list(const std::vector<uint64_t>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

void print(const char* scenario, const Tally& t, const SamplePolicy& p) {
  std::printf(
      "{\"scenario\":\"%s\",\"sampled\":%s,\"recorded\":%s,\"unrecorded\":%s,\"uncounted\":%s,"
      "\"switches\":%llu,\"recording\":%s,\"open\":%llu,\"queries\":%llu}\n",
      scenario, list(t.sampled).c_str(), list(t.recorded).c_str(), list(t.unrecorded).c_str(),
      list(t.uncounted).c_str(), static_cast<unsigned long long>(t.switches), p.recording ? "true" : "false",
      static_cast<unsigned long long>(p.open), static_cast<unsigned long long>(t.queries));
}

void count(Tally& t, size_t kernel, LaunchFate fate) {
  switch (fate) {
    case LaunchFate::Sampled: ++t.sampled[kernel]; break;
    case LaunchFate::Recorded: ++t.recorded[kernel]; break;
    case LaunchFate::Unrecorded: ++t.unrecorded[kernel]; break;
    case LaunchFate::Uncounted: ++t.uncounted[kernel]; break;
  }
}

// `kernels` kernels launched round-robin, `launches` launches each, one thread (each launch closes at its
// API exit before the next); `captures` stream captures active meanwhile (on other streams).
void round_robin(const char* scenario, size_t kernels, uint64_t launches, uint64_t first, uint64_t every,
                 uint64_t captures = 0) {
  SamplePolicy p;
  p.first = first, p.every = every;
  for (uint64_t c = 0; c < captures; ++c) profiler::capture_began(p);
  Tally t(kernels);
  std::vector<uint64_t> n(kernels);
  auto toggle = [&](bool) { ++t.switches; return true; };
  auto query = [&] { ++t.queries; return false; };
  for (uint64_t i = 0; i < launches; ++i) {
    for (size_t k = 0; k < kernels; ++k) {
      const LaunchFate fate = profiler::sample_launch(p, ++n[k], query, toggle);
      count(t, k, fate);
      if (fate == LaunchFate::Sampled) profiler::close_launch(p);
    }
  }
  print(scenario, t, p);
}

}  // namespace

int main() {
  round_robin("kernellaunch", 3, 24000, 1000, 64);
  round_robin("few_launches", 2, 1000, 1000, 64);
  round_robin("every_other", 2, 5, 1, 2);
  round_robin("kernellaunch_beside_a_capture", 3, 24000, 1000, 64, 1);

  {  // a stream capture: no switch inside it, its launches not counted
    SamplePolicy p;
    p.first = 1, p.every = 2;
    Tally t(1);
    bool capturing = false;
    auto captured = [&] { ++t.queries; return capturing; };
    auto toggle = [&](bool) { ++t.switches; return true; };
    auto launch = [&](uint64_t n) {
      const LaunchFate fate = profiler::sample_launch(p, n, captured, toggle);
      count(t, 0, fate);
      if (fate == LaunchFate::Sampled) profiler::close_launch(p);
    };
    launch(1);  // sampled, records on
    capturing = true, profiler::capture_began(p);
    launch(2);  // not wanted, a switch off would be needed: uncounted, no switch
    launch(3);  // wanted, records still on: sampled (no execution, so no record either)
    capturing = false, profiler::capture_ended(p);
    launch(4);  // not wanted: switch off, unrecorded (no capture active: nothing asked)
    capturing = true, profiler::capture_began(p);
    launch(5);  // wanted, a switch on would be needed: uncounted, no switch
    launch(6);  // not wanted, records off: uncounted (captured)
    print("capture", t, p);
  }
  {  // another thread's sampled launch in progress keeps records on for an unsampled one
    SamplePolicy p;
    p.first = 1, p.every = 100;
    Tally t(2);
    auto toggle = [&](bool) { ++t.switches; return true; };
    auto never = [] { return false; };
    count(t, 0, profiler::sample_launch(p, 1, never, toggle));  // thread A: sampled, API call in progress
    count(t, 1, profiler::sample_launch(p, 1, never, toggle));  // thread B: sampled
    profiler::close_launch(p);                                    // B returns
    count(t, 1, profiler::sample_launch(p, 2, never, toggle));  // B: not wanted, A still open: recorded
    profiler::close_launch(p);                                    // A returns
    count(t, 1, profiler::sample_launch(p, 3, never, toggle));  // B: switch off, unrecorded
    print("two_threads", t, p);
  }
  {  // a switch CUPTI refuses: a wanted launch with records off is unrecorded, and counted
    SamplePolicy p;
    p.first = 1, p.every = 2;
    Tally t(1);
    bool works = true;
    auto toggle = [&](bool) { ++t.switches; return works; };
    auto never = [] { return false; };
    count(t, 0, profiler::sample_launch(p, 1, never, toggle));
    profiler::close_launch(p);
    count(t, 0, profiler::sample_launch(p, 2, never, toggle));  // switched off
    works = false;
    count(t, 0, profiler::sample_launch(p, 3, never, toggle));  // wanted; the switch on fails
    print("refused_switch", t, p);
  }
  {  // a graph launch switches records on and holds them until its exit
    SamplePolicy p;
    p.first = 1, p.every = 64;
    Tally t(1);
    auto toggle = [&](bool) { ++t.switches; return true; };
    auto never = [] { return false; };
    count(t, 0, profiler::sample_launch(p, 1, never, toggle));
    profiler::close_launch(p);
    count(t, 0, profiler::sample_launch(p, 2, never, toggle));  // off
    profiler::record_uncounted(p, toggle);                       // on, held
    const bool held = p.recording && p.open == 1;
    profiler::close_launch(p);
    count(t, 0, profiler::sample_launch(p, 3, never, toggle));  // off again
    std::printf("{\"scenario\":\"graph_held\",\"held\":%s}\n", held ? "true" : "false");
    print("graph", t, p);
  }
  return 0;
}

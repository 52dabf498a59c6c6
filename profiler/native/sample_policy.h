// Which launches of a sampled trace get a kernel record (launch_sampler.h), as a function of the launch's
// number and the records' state alone, so that it can be checked without a GPU
// (tests/profiler/test_sample_policy.py).
#pragma once

#include <cstdint>

namespace profiler {

struct SamplePolicy {
  uint64_t first = 1000;  // each kernel's launches 1..first are recorded
  uint64_t every = 64;    // and every `every`-th after: first + every, first + 2 * every, ...
  bool recording = true;  // kernel records are on
  uint64_t open = 0;      // launches between API enter and exit that must get a record
  uint64_t captures = 0;  // stream captures begun and not yet ended (capture_began, capture_ended)
};

enum class LaunchFate {
  Sampled,     // recorded, and holds `open` until its API exit (`close_launch`)
  Recorded,    // recorded because another thread's sampled launch holds records on
  Unrecorded,  // counted, with records off
  Uncounted,   // launched into a stream being captured into a graph: no execution
};

// The fate of a kernel's `n`-th counted launch (from 1). Switches records with `switch_records(on)` (which
// returns whether the switch took) when the launch needs them switched and no other recorded launch is in
// progress; asks `capturing()` (a driver call) only where it matters: a launch into a stream being
// captured into a graph is no execution, is not counted, and gets no switch; while no capture is active in
// the process, no launch can be one, and nothing is asked.
template <typename Capturing, typename Switch>
LaunchFate sample_launch(SamplePolicy& policy, uint64_t n, Capturing capturing, Switch switch_records) {
  const bool want = n <= policy.first || (n - policy.first) % policy.every == 0;
  const bool switching = want ? !policy.recording : policy.recording && policy.open == 0;
  const auto captured = [&] { return policy.captures > 0 && capturing(); };
  if (switching) {
    if (captured()) return LaunchFate::Uncounted;
    if (switch_records(want)) policy.recording = want;
  }
  if (want && policy.recording) {
    ++policy.open;
    return LaunchFate::Sampled;
  }
  if (policy.recording) return LaunchFate::Recorded;
  return switching || !captured() ? LaunchFate::Unrecorded : LaunchFate::Uncounted;
}

// A stream capture began (its cuStreamBeginCapture* call succeeded) or ended (cuStreamEndCapture returned
// the graph, or that the capture had been invalidated; a call that fails otherwise ends nothing).
inline void capture_began(SamplePolicy& policy) { ++policy.captures; }
inline void capture_ended(SamplePolicy& policy) {
  if (policy.captures > 0) --policy.captures;
}

// A launch that is not counted (a graph, cooperative or legacy launch): records on until its API exit.
template <typename Switch>
void record_uncounted(SamplePolicy& policy, Switch switch_records) {
  if (!policy.recording && switch_records(true)) policy.recording = true;
  ++policy.open;
}

// The API exit of a launch that held `open`.
inline void close_launch(SamplePolicy& policy) {
  if (policy.open > 0) --policy.open;
}

}  // namespace profiler

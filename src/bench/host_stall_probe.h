// Finds the times the machine's CPUs ran slow because something outside the
// machine took them: on a virtual machine, the hypervisor descheduling or
// time-slicing its vCPUs. Such stalls put a latency tail on every request of
// a benchmark, whatever the server does, and make two runs' p99s differ for
// reasons neither controls.
//
// A probe thread runs the same small unit of arithmetic every few
// milliseconds and times it in the thread's CPU time. A guest kernel charges
// time the host took to whatever thread was running, so a unit whose CPU time
// is several times the usual means the CPU itself was slow; being preempted
// by other threads of the machine only adds wall time, not CPU time, so a
// busy machine alone does not look like a stall.
//
// FindStalls and OutsideStalls are pure functions; HostStallProbe owns its
// thread (Stop joins it) and is used from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "bench/stats.h"

namespace inferd::bench {

// One timed unit of the probe.
struct ProbeUnit {
  double start_s = 0;  // seconds since the run started
  double wall_us = 0;
  double cpu_us = 0;  // the probe thread's CPU time for the unit
};

// [start_s, end_s): seconds since the run started.
struct StallInterval {
  double start_s = 0;
  double end_s = 0;
};

// The intervals in which units took more than `slow_factor` times the usual
// unit's CPU time (the 10th percentile of all units, so up to 90% of the run
// may be slow and still be seen), each slow unit covering its wall time;
// slow units less than `merge_gap_s` apart join one interval. Units in any
// order; the intervals sorted.
std::vector<StallInterval> FindStalls(std::vector<ProbeUnit> units, double slow_factor, double merge_gap_s);

// The samples whose request was sent (end - latency) outside every
// [start, end + guard_s] of `stalls` (sorted): the guard leaves out the
// requests that queued behind the backlog a stall built.
std::vector<Sample> OutsideStalls(const std::vector<Sample>& samples, const std::vector<StallInterval>& stalls,
                                  double guard_s);

// The seconds of [from_s, to_s) that `stalls` cover.
double StalledSeconds(const std::vector<StallInterval>& stalls, double from_s, double to_s);

// What a load run's probe saw over its reported windows.
struct HostStalls {
  bool probed = false;
  std::vector<StallInterval> stalls;  // over the whole run, warm-up included
  int count = 0;                      // stalls that overlap the reported windows
  double stalled_s = 0;               // the reported windows' seconds inside stalls
  double guard_s = 0;
  Summary outside;  // the reported windows' requests sent outside every stall and its guard
};

// A load run's HostStalls: the stalls among `units` (over 3x the usual CPU
// time; under 20 ms apart merged), and those and `samples` over the reported
// windows [from_s, to_s).
HostStalls SummarizeStalls(std::vector<ProbeUnit> units, const std::vector<Sample>& samples, double from_s, double to_s,
                           double guard_s);

struct HostStallProbeOptions {
  std::chrono::microseconds period{5000};  // from one unit's start to the next
  int iterations = 10000;                  // per unit: ~40 us on a 2020s server core
};

class HostStallProbe {
 public:
  // Starts the probe thread; unit times are seconds since `t0`.
  HostStallProbe(std::chrono::steady_clock::time_point t0, HostStallProbeOptions options);
  ~HostStallProbe();
  HostStallProbe(const HostStallProbe&) = delete;
  HostStallProbe& operator=(const HostStallProbe&) = delete;

  // Stops the thread (within one period) and returns every unit it timed:
  // at least one.
  std::vector<ProbeUnit> Stop();

 private:
  void Run();

  const std::chrono::steady_clock::time_point t0_;
  const HostStallProbeOptions options_;
  std::atomic<bool> stop_{false};
  std::vector<ProbeUnit> units_;  // written by the thread until Stop joins it
  std::thread thread_;
};

}  // namespace inferd::bench

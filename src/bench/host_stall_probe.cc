#include "bench/host_stall_probe.h"

#include <time.h>

#include <algorithm>

namespace inferd::bench {
namespace {

double ThreadCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Dependent arithmetic on one value that stays in L1 (volatile: the compiler
// may neither drop the work nor move it out from between the clock reads), so
// neighbours' use of caches or memory bandwidth hardly slows it; losing the
// CPU does.
void Unit(int iterations) {
  volatile double x = 1;
  for (int i = 0; i < iterations; ++i) x = x * 1.0000001 + 0.5;
}

// A unit over 3x the usual CPU time is a stall (the usual unit varies by a
// few percent; the stalls seen on cloud VMs slow it 5-15x); slow units closer
// than 20 ms (four probe periods) are one stall.
constexpr double kSlowFactor = 3;
constexpr double kMergeGapS = 0.02;

}  // namespace

std::vector<StallInterval> FindStalls(std::vector<ProbeUnit> units, double slow_factor, double merge_gap_s) {
  std::vector<StallInterval> stalls;
  if (units.empty()) return stalls;
  std::vector<double> cpu;
  cpu.reserve(units.size());
  for (const auto& u : units) cpu.push_back(u.cpu_us);
  const double usual = Percentile(std::move(cpu), 10);
  std::sort(units.begin(), units.end(), [](const ProbeUnit& a, const ProbeUnit& b) { return a.start_s < b.start_s; });
  for (const auto& u : units) {
    if (u.cpu_us <= slow_factor * usual) continue;
    const double end = u.start_s + u.wall_us * 1e-6;
    if (!stalls.empty() && u.start_s - stalls.back().end_s < merge_gap_s) {
      stalls.back().end_s = std::max(stalls.back().end_s, end);
    } else {
      stalls.push_back({u.start_s, end});
    }
  }
  return stalls;
}

std::vector<Sample> OutsideStalls(const std::vector<Sample>& samples, const std::vector<StallInterval>& stalls,
                                  double guard_s) {
  std::vector<Sample> out;
  out.reserve(samples.size());
  for (const auto& s : samples) {
    const double sent = s.end_s - s.latency_us * 1e-6;
    // The first stall ending (guard included) at or after the send.
    auto it = std::lower_bound(stalls.begin(), stalls.end(), sent,
                               [guard_s](const StallInterval& st, double t) { return st.end_s + guard_s < t; });
    if (it != stalls.end() && it->start_s <= sent) continue;
    out.push_back(s);
  }
  return out;
}

double StalledSeconds(const std::vector<StallInterval>& stalls, double from_s, double to_s) {
  double total = 0;
  for (const auto& st : stalls) total += std::max(0.0, std::min(st.end_s, to_s) - std::max(st.start_s, from_s));
  return total;
}

HostStalls SummarizeStalls(std::vector<ProbeUnit> units, const std::vector<Sample>& samples, double from_s, double to_s,
                           double guard_s) {
  HostStalls h;
  h.probed = true;
  h.stalls = FindStalls(std::move(units), kSlowFactor, kMergeGapS);
  for (const auto& st : h.stalls) h.count += st.end_s > from_s && st.start_s < to_s ? 1 : 0;
  h.stalled_s = StalledSeconds(h.stalls, from_s, to_s);
  h.guard_s = guard_s;
  h.outside = Summarize(OutsideStalls(samples, h.stalls, guard_s), from_s, to_s);
  return h;
}

HostStallProbe::HostStallProbe(std::chrono::steady_clock::time_point t0, HostStallProbeOptions options)
    : t0_(t0), options_(options) {
  thread_ = std::thread([this] { Run(); });
}

HostStallProbe::~HostStallProbe() { Stop(); }

std::vector<ProbeUnit> HostStallProbe::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  return units_;
}

void HostStallProbe::Run() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next = Clock::now();
  for (;;) {  // at least one unit, however soon Stop comes
    const Clock::time_point start = Clock::now();
    const double cpu0 = ThreadCpuSeconds();
    Unit(options_.iterations);
    const double cpu1 = ThreadCpuSeconds();
    const Clock::time_point end = Clock::now();
    units_.push_back({std::chrono::duration<double>(start - t0_).count(),
                      std::chrono::duration<double, std::micro>(end - start).count(), (cpu1 - cpu0) * 1e6});
    next += options_.period;
    if (next < end) next = end;  // fell behind (a stall): no burst of catch-up units
    if (stop_.load(std::memory_order_relaxed)) return;
    std::this_thread::sleep_until(next);  // the probe's schedule, not a wait for an event
  }
}

}  // namespace inferd::bench

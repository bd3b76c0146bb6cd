// CpuLoad: how busy the CPUs this process may run on are, as a fraction
// (0 idle .. 1 every CPU busy), for policies that trade latency for CPU time
// (adaptive batching weighs the CPU a wait saves by it; docs/batching.md).
//
// It counts every process on those CPUs, not only this one: on a saturated
// box the threads that parse and answer requests queue behind whatever else
// runs there. Under a cgroup CPU quota (a container limited to fewer CPUs
// than it sees), the quota is not taken into account: the figure is the
// CPUs' own busy time.
//
// Thread-safety: Utilization is thread-safe. Ownership: the server owns its
// CpuLoad; schedulers hold a non-owning pointer.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"

namespace inferd {

class CpuLoad {
 public:
  virtual ~CpuLoad() = default;
  // The busy fraction, smoothed over about the last half second; 0 before a
  // first full sample window. `now` is the caller's clock (it decides when a
  // new sample is due), so tests drive it with a fake clock.
  virtual double Utilization(TimePoint now) = 0;
};

// Cumulative CPU time, in the kernel's ticks.
struct CpuTicks {
  uint64_t busy = 0;   // user, nice, system, irq, softirq, steal
  uint64_t total = 0;  // busy + idle + iowait
};

// Sums the per-CPU lines ("cpuN ...") of /proc/stat text whose N is in
// `cpus` (every CPU when empty). nullopt when the text has none of them or a
// line is malformed.
std::optional<CpuTicks> ParseProcStat(std::string_view text, const std::vector<int>& cpus);

// Reads cumulative ticks from `source` at most once per `period` and keeps an
// exponentially smoothed busy fraction of the windows between reads (time
// constant `tau`). A caller that finds another one sampling gets the current
// value without waiting.
class SampledCpuLoad final : public CpuLoad {
 public:
  using Source = std::function<std::optional<CpuTicks>()>;
  explicit SampledCpuLoad(Source source, Duration period = std::chrono::milliseconds(100),
                          Duration tau = std::chrono::milliseconds(500));
  double Utilization(TimePoint now) override;

 private:
  const Source source_;
  const Duration period_;
  const double tau_s_;
  Mutex mu_;
  std::optional<TimePoint> last_at_ TSA_GUARDED_BY(mu_);
  CpuTicks last_ TSA_GUARDED_BY(mu_);
  bool have_value_ TSA_GUARDED_BY(mu_) = false;
  std::atomic<double> value_{0};
};

// The machine's CPUs this process may run on (its affinity mask at
// construction), read from /proc/stat. Where /proc/stat cannot be read the
// utilization stays 0 (policies then behave as on an idle machine).
std::unique_ptr<CpuLoad> MakeSystemCpuLoad();

// A fixed utilization, for tests.
class FixedCpuLoad final : public CpuLoad {
 public:
  explicit FixedCpuLoad(double utilization = 0) : value_(utilization) {}
  double Utilization(TimePoint) override { return value_.load(std::memory_order_relaxed); }
  void Set(double utilization) { value_.store(utilization, std::memory_order_relaxed); }

 private:
  std::atomic<double> value_;
};

}  // namespace inferd

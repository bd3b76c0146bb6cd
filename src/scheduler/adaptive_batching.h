// AdaptiveBatching: when to send a batch, learned instead of configured
// (batching.mode adaptive; docs/batching.md).
//
// It keeps an estimate of the arrival rate (rows per second, exponentially
// decayed, per batching group) and of the model's batch cost
// (BatchCostModel). When an instance is free and a batch of r rows is ready,
// it compares sending now with waiting w for the m = rate*w rows expected to
// arrive meanwhile:
//   now:  the r rows finish after c(r); the m rows then run after it,
//         finishing at max(c(r), w) + c(m);
//   wait: all r+m rows finish at w + c(r+m).
// It waits for the w (from 200 us, the shortest wait a sleeping thread keeps
// on a busy machine, up to the budget) that most lowers the mean latency of
// those r+m rows, and not at all when no w does. At low load m is tiny and
// waiting never pays, so idle traffic gets no added delay; as load rises
// batching pays and waits appear; under saturation the queue already holds
// full batches and it sends at once.
//
// CPU (batching.cpu_aware, off by default): sent at once, the m rows would
// run in the small batches a free worker forms from what queued while the
// previous one ran (k rows each, k = rate * c(k), at least 1; n = m/k
// batches); merged into this batch they save s = c(r) + n*c(k) - c(r+m) of
// CPU, n batches' fixed cost.
// On a busy machine every other runnable thread (those parsing and
// answering requests, other models, the clients on the same box) waits for
// that CPU: with the CPUs' busy fraction U, removing s seconds of work saves
// about s * U / (1-U)^2 seconds of latency summed over everything queued
// (the derivative of M/M/1 response time, times the arrivals it affects). It
// is added to the wait's gain, weighted by the chance that anyone arrives
// (1 - e^-m). At low U it is negligible; near saturation it makes small
// batches expensive, which is when a fixed delay used to win the tail.
//
// Budget: never past the oldest request's enqueue time + max_delay_us, and
// with a latency target, never so long that the oldest request's queue time
// plus the predicted execution exceeds it.
//
// Thread-safety: none; the owner (BatchQueue, under DynamicBatcher's mutex)
// serializes access.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "core/batching_spec.h"
#include "core/clock.h"
#include "core/cpu_load.h"
#include "scheduler/batch_cost_model.h"

namespace inferd {

// Arrivals per second, decayed with time constant `tau`.
class ArrivalRate {
 public:
  explicit ArrivalRate(Duration tau = std::chrono::milliseconds(500)) : tau_s_(Seconds(tau)) {}
  void Add(TimePoint now, double count);
  double PerSecond(TimePoint now) const;

 private:
  static double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
  double tau_s_;
  double value_ = 0;  // per second, as of last_
  TimePoint last_{};
  bool started_ = false;
};

class AdaptiveBatching {
 public:
  // `positions`: the model is padded (its cost depends on padded length).
  // `cpu`: the machine's load (not owned, outlives this; null: treated as
  // idle), read only when spec.cpu_aware.
  AdaptiveBatching(AdaptiveBatchingSpec spec, int max_batch_size, bool positions, CpuLoad* cpu = nullptr);

  void OnArrival(TimePoint now, int64_t group, int64_t rows);
  // A batch of `rows` rows padded to `length` positions each (1 when not
  // padded) kept the instance busy for `took`.
  void OnExecution(int64_t rows, int64_t length, Duration took);

  // A batch of `rows` rows of `group`, padded to `length`, whose oldest
  // request was enqueued at `oldest`, is ready and an instance is free:
  // nullopt to send it now, else the time to look again (when, without
  // further arrivals, it should be sent).
  std::optional<TimePoint> WaitUntil(TimePoint now, TimePoint oldest, int64_t group, int64_t rows, int64_t length);

  struct Estimates {
    double arrival_rows_per_s = 0;
    double fixed_s = 0, per_row_s = 0, per_position_s = 0;
    bool fitted = false;
    uint64_t samples = 0;
    double last_wait_s = 0;      // the latest decision's wait (0: sent at once)
    uint64_t waits = 0;          // batches held back to let more requests arrive
    double wait_s_total = 0;     // their planned waits, summed
    double cpu_utilization = 0;  // as of the latest decision (0 when not cpu_aware)
  };
  Estimates estimates(TimePoint now) const;
  const BatchCostModel& cost() const { return cost_; }

 private:
  AdaptiveBatchingSpec spec_;
  int64_t max_rows_;
  BatchCostModel cost_;
  CpuLoad* cpu_;
  double cpu_utilization_ = 0;
  ArrivalRate total_;
  std::map<int64_t, ArrivalRate> groups_;  // bounded: one per bucket, plus 0
  double last_wait_s_ = 0;
  uint64_t waits_ = 0;
  double wait_s_total_ = 0;
  // The plan for the batch waiting now: decided once per oldest request, so
  // a wait that brought no arrivals is not extended by the next look.
  std::optional<TimePoint> planned_oldest_;
  int64_t planned_group_ = 0;
  TimePoint planned_send_{};
};

}  // namespace inferd

#include "scheduler/adaptive_batching.h"

#include <algorithm>
#include <cmath>

namespace inferd {
namespace {

// Shorter waits are not planned: on a loaded 2-core machine a worker that
// sleeps for tens of microseconds wakes up milliseconds later (measured with
// tiny_mlp: planned 30 us waits cost it 2x p99), so they cannot pay off.
constexpr double kMinWaitS = 200e-6;

// U/(1-U)^2 grows without bound; past this a wait's CPU value stops rising
// (it is 380 times the CPU saved here).
constexpr double kMaxUtilization = 0.95;

// The CPU the m rows arriving over a wait take when sent without waiting:
// a free worker takes whatever has queued, so they run in batches of about
// k rows, the rows that arrive while one batch runs (k = rate * c(k), at
// least 1), n = m / k batches in all. Past saturation (rate * c(k) grows
// faster than k) they queue into one batch.
template <typename Cost>
double EagerCost(const Cost& c, double rate, double m) {
  if (m <= 1) return c(m);
  double k = 1;
  for (int i = 0; i < 8; ++i) k = std::clamp(rate * c(k), 1.0, m);
  const double n = m / k;
  return n * c(k);
}

}  // namespace

void ArrivalRate::Add(TimePoint now, double count) {
  value_ = PerSecond(now) + count / tau_s_;
  last_ = now;
  started_ = true;
}

double ArrivalRate::PerSecond(TimePoint now) const {
  if (!started_) return 0;
  const double dt = std::max(0.0, Seconds(now - last_));
  return value_ * std::exp(-dt / tau_s_);
}

AdaptiveBatching::AdaptiveBatching(AdaptiveBatchingSpec spec, int max_batch_size, bool positions, CpuLoad* cpu)
    : spec_(spec), max_rows_(std::max(1, max_batch_size)), cost_(positions), cpu_(spec.cpu_aware ? cpu : nullptr) {}

void AdaptiveBatching::OnArrival(TimePoint now, int64_t group, int64_t rows) {
  total_.Add(now, static_cast<double>(rows));
  groups_[group].Add(now, static_cast<double>(rows));
}

void AdaptiveBatching::OnExecution(int64_t rows, int64_t length, Duration took) {
  cost_.Observe(static_cast<double>(rows), static_cast<double>(rows * std::max<int64_t>(1, length)),
                std::chrono::duration<double>(took).count());
}

std::optional<TimePoint> AdaptiveBatching::WaitUntil(TimePoint now, TimePoint oldest, int64_t group, int64_t rows,
                                                     int64_t length) {
  last_wait_s_ = 0;
  if (rows >= max_rows_ || !cost_.fitted()) return std::nullopt;
  const bool planned = planned_oldest_ && *planned_oldest_ == oldest && planned_group_ == group;
  if (planned && now >= planned_send_) return std::nullopt;
  // The fitted cost is linear in the rows, c(n) = a + b*n with a, b >= 0
  // (positions are rows times the length). Then a wait of w for m more rows
  // changes the rows' total latency in the search below by at most
  // m*max(a - w, 0) - r*w: it pays only if the fixed cost a is above the
  // shortest wait. Unless the CPU is weighed too, skip the search then (it is
  // most of the decision's ~1 us, under the queue lock).
  if (!cpu_ && cost_.fixed_s() <= kMinWaitS) return std::nullopt;
  auto it = groups_.find(group);
  const double rate = it == groups_.end() ? 0 : it->second.PerSecond(now);
  if (rate <= 0) return std::nullopt;
  const double len = static_cast<double>(std::max<int64_t>(1, length));
  auto c = [&](double n) { return n <= 0 ? 0.0 : cost_.Predict(n, n * len); };
  const double waited = std::chrono::duration<double>(now - oldest).count();
  double budget = static_cast<double>(spec_.max_delay_us) * 1e-6 - waited;
  budget = std::min(budget, static_cast<double>(max_rows_ - rows) / rate);  // no point waiting past a full batch
  if (budget < kMinWaitS) return std::nullopt;

  const double r = static_cast<double>(rows);
  const double c_r = c(r);
  if (cpu_) cpu_utilization_ = std::clamp(cpu_->Utilization(now), 0.0, 1.0);
  const double u = std::min(cpu_utilization_, kMaxUtilization);
  const double cpu_weight = u / ((1 - u) * (1 - u));  // latency saved per second of CPU saved
  double best_gain = 0, best_w = 0;
  // Candidate waits from the shortest one that can be kept (kMinWaitS) to the
  // budget, so that with a short budget no candidate falls below kMinWaitS
  // and hides a longer one that pays.
  constexpr int kSteps = 16;
  for (int k = 0; k < kSteps; ++k) {
    const double w = kMinWaitS + (budget - kMinWaitS) * k / (kSteps - 1);
    const double m = rate * w;
    const double finish_wait = w + c(r + m);
    if (spec_.latency_target_us > 0 && waited + finish_wait > static_cast<double>(spec_.latency_target_us) * 1e-6)
      break;
    const double now_total = r * c_r + m * (std::max(c_r, w) + c(m) - w / 2);
    const double wait_total = r * finish_wait + m * (finish_wait - w / 2);
    const double cpu_saved = std::max(0.0, c_r + EagerCost(c, rate, m) - c(r + m)) * (1 - std::exp(-m));
    const double gain = (now_total - wait_total + cpu_weight * cpu_saved) / (r + m);  // per row
    if (gain > best_gain) {
      best_gain = gain;
      best_w = w;
    }
  }
  // Waiting must save more than noise (2% of the batch's own cost).
  if (best_w <= 0 || best_gain < 0.02 * c_r) return std::nullopt;
  if (planned) return planned_send_;  // still worth waiting: keep to the first plan
  last_wait_s_ = best_w;
  ++waits_;
  wait_s_total_ += best_w;
  planned_oldest_ = oldest;
  planned_group_ = group;
  planned_send_ = now + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(best_w));
  return planned_send_;
}

AdaptiveBatching::Estimates AdaptiveBatching::estimates(TimePoint now) const {
  Estimates e;
  e.arrival_rows_per_s = total_.PerSecond(now);
  e.fixed_s = cost_.fixed_s();
  e.per_row_s = cost_.per_row_s();
  e.per_position_s = cost_.per_position_s();
  e.fitted = cost_.fitted();
  e.samples = cost_.samples();
  e.last_wait_s = last_wait_s_;
  e.waits = waits_;
  e.wait_s_total = wait_s_total_;
  e.cpu_utilization = cpu_utilization_;
  return e;
}

}  // namespace inferd

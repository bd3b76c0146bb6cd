#include "scheduler/adaptive_batching.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "scheduler/batch_queue.h"
#include "testing/test_requests.h"

namespace inferd {
namespace {

using std::chrono::duration;
using std::chrono::duration_cast;
using std::chrono::microseconds;

const TimePoint kT0 = TimePoint(std::chrono::seconds(100));

Duration Secs(double s) { return duration_cast<Duration>(duration<double>(s)); }

TEST(BatchCostModel, ConvergesOnANoisyLinearCurve) {
  BatchCostModel m;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> size(1, 32);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  for (int i = 0; i < 400; ++i) {
    const int b = size(rng);
    m.Observe(b, b, (0.002 + 0.0003 * b) * noise(rng));
  }
  ASSERT_TRUE(m.fitted());
  EXPECT_NEAR(m.fixed_s(), 0.002, 0.0003);
  EXPECT_NEAR(m.per_row_s(), 0.0003, 0.00003);
  EXPECT_NEAR(m.Predict(16, 16), 0.002 + 0.0048, 0.0004);
}

TEST(BatchCostModel, SeparatesRowsFromPaddedPositions) {
  BatchCostModel m(/*positions=*/true);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> size(1, 16);
  std::uniform_int_distribution<int> len(1, 8);
  for (int i = 0; i < 600; ++i) {
    const int b = size(rng), l = 16 * len(rng);
    m.Observe(b, b * l, 0.001 + 0.0001 * b + 0.00001 * b * l);
  }
  ASSERT_TRUE(m.fitted());
  EXPECT_NEAR(m.fixed_s(), 0.001, 1e-5);
  EXPECT_NEAR(m.per_row_s(), 0.0001, 1e-6);
  EXPECT_NEAR(m.per_position_s(), 0.00001, 1e-7);
}

TEST(BatchCostModel, NeverReportsACostThatFallsWithMoreWork) {
  BatchCostModel m(/*positions=*/true);
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> size(1, 16);
  std::uniform_int_distribution<int> len(1, 128);
  for (int i = 0; i < 300; ++i) {
    const int b = size(rng), l = len(rng);
    // Longer padded batches happen to run a little faster: noise that a plain fit turns into c < 0.
    m.Observe(b, b * l, 0.002 + 0.0003 * b - 0.0000005 * b * l);
  }
  ASSERT_TRUE(m.fitted());
  EXPECT_GE(m.fixed_s(), 0);
  EXPECT_GE(m.per_row_s(), 0);
  EXPECT_EQ(m.per_position_s(), 0);  // dropped from the fit
  EXPECT_GT(m.Predict(8, 8 * 128), m.Predict(1, 128));
}

TEST(BatchCostModel, AssumesNoBatchingBenefitUntilSizesDiffer) {
  BatchCostModel m;
  for (int i = 0; i < 50; ++i) m.Observe(1, 1, 0.004);
  EXPECT_FALSE(m.fitted());
  EXPECT_NEAR(m.Predict(8, 8), 0.032, 1e-9);  // proportional: waiting can never look free
}

TEST(BatchCostModel, FollowsTheModelWhenItsCostChanges) {
  BatchCostModel m;
  for (int i = 0; i < 1000; ++i) m.Observe(1 + i % 16, 0, 0.001 + 0.0001 * (1 + i % 16));
  EXPECT_NEAR(m.fixed_s(), 0.001, 1e-5);
  for (int i = 0; i < 2000; ++i) m.Observe(1 + i % 16, 0, 0.004 + 0.0005 * (1 + i % 16));
  EXPECT_NEAR(m.fixed_s(), 0.004, 1e-4);
  EXPECT_NEAR(m.per_row_s(), 0.0005, 1e-5);
}

TEST(ArrivalRate, ConvergesOnASteadyStreamAndDecaysWhenItStops) {
  ArrivalRate r(std::chrono::milliseconds(500));
  TimePoint t = kT0;
  for (int i = 0; i < 5000; ++i) {  // 1000/s for 5 s
    t += microseconds(1000);
    r.Add(t, 1);
  }
  EXPECT_NEAR(r.PerSecond(t), 1000, 20);
  EXPECT_LT(r.PerSecond(t + std::chrono::seconds(5)), 1.0);
}

// A discrete-event simulation of one instance behind a BatchQueue: Poisson
// arrivals, execution time a + k*rows, time only from the events.
struct SimResult {
  double mean_batch = 0;
  double mean_latency_s = 0;
  double max_added_delay_s = 0;  // waits while the instance was free
  size_t waits_while_idle = 0;
};

SimResult Simulate(BatchPolicy policy, double rate, double a, double k, double seconds = 20, uint64_t seed = 1) {
  policy.max_queue_size = 1 << 20;
  BatchQueue q(policy);
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<TimePoint> arrivals;
  for (double t = gap(rng); t < seconds; t += gap(rng)) arrivals.push_back(kT0 + Secs(t));
  TimePoint now = kT0, free_at = kT0;
  size_t next = 0, batches = 0, rows = 0;
  double latency = 0;
  SimResult out;
  std::optional<TimePoint> idle_since;  // the instance free with requests queued, waiting
  while (next < arrivals.size() || !q.empty()) {
    std::optional<TimePoint> wake;
    if (now >= free_at && !q.empty()) {
      BatchQueue::Decision d = q.Next(now);
      if (!d.batch.empty()) {
        if (idle_since)
          out.max_added_delay_s = std::max(out.max_added_delay_s, duration<double>(now - *idle_since).count());
        idle_since.reset();
        const double cost = a + k * static_cast<double>(d.batch.size());
        free_at = now + Secs(cost);
        q.RecordExecution(static_cast<int64_t>(d.batch.size()), 1, Secs(cost));
        for (const auto& p : d.batch) latency += duration<double>(free_at - p->enqueued).count();
        rows += d.batch.size();
        ++batches;
        continue;
      }
      if (!idle_since) {
        idle_since = now;
        ++out.waits_while_idle;
      }
      wake = d.wake_at;
    }
    TimePoint t = TimePoint::max();
    if (next < arrivals.size()) t = arrivals[next];
    if (now < free_at) t = std::min(t, free_at);
    if (wake) t = std::min(t, *wake);
    if (t == TimePoint::max()) break;
    now = std::max(now, t);
    while (next < arrivals.size() && arrivals[next] <= now) {
      auto p = testing::Pending(1);
      EXPECT_TRUE(q.Push(p, arrivals[next]).ok());
      ++next;
    }
  }
  out.mean_batch = batches ? static_cast<double>(rows) / static_cast<double>(batches) : 0;
  out.mean_latency_s = rows ? latency / static_cast<double>(rows) : 0;
  return out;
}

BatchPolicy Adaptive(int64_t max_delay_us, uint64_t target_us = 0) {
  BatchPolicy p;
  p.max_batch_size = 32;
  p.dynamic = true;
  p.adaptive.enabled = true;
  p.adaptive.max_delay_us = static_cast<uint64_t>(max_delay_us);
  p.adaptive.latency_target_us = target_us;
  return p;
}

BatchPolicy Fixed(int64_t delay_us) {
  BatchPolicy p;
  p.max_batch_size = 32;
  p.dynamic = true;
  p.max_queue_delay = microseconds(delay_us);
  return p;
}

// Cost 2 ms per batch + 0.2 ms per row: at most ~3800 rows/s in batches of 32.
constexpr double kA = 0.002, kK = 0.0002;

TEST(AdaptiveBatching, AddsNoDelayAtLowLoad) {
  SimResult s = Simulate(Adaptive(5000), 20, kA, kK);
  EXPECT_EQ(s.waits_while_idle, 0u);
  EXPECT_EQ(s.max_added_delay_s, 0);
  EXPECT_NEAR(s.mean_latency_s, kA + kK, 0.0005);  // each request alone, at once
}

TEST(AdaptiveBatching, BatchesMoreAsLoadRises) {
  const SimResult low = Simulate(Adaptive(5000), 50, kA, kK);
  const SimResult mid = Simulate(Adaptive(5000), 800, kA, kK);
  const SimResult high = Simulate(Adaptive(5000), 2500, kA, kK);
  EXPECT_LT(low.mean_batch, mid.mean_batch);
  EXPECT_LT(mid.mean_batch, high.mean_batch);
  EXPECT_GT(high.mean_batch, 5);
  EXPECT_EQ(low.waits_while_idle, 0u);
  EXPECT_GT(mid.waits_while_idle, 0u);  // it held batches back where that paid
}

TEST(AdaptiveBatching, NeverWaitsPastItsBudget) {
  for (double rate : {300.0, 800.0, 2500.0}) {
    const SimResult s = Simulate(Adaptive(1000), rate, kA, kK);
    EXPECT_LE(s.max_added_delay_s, 0.001 + 1e-9) << rate;
  }
  // A latency target tighter than the budget bounds waits by predicted completion.
  for (double rate : {300.0, 800.0}) {
    const SimResult s = Simulate(Adaptive(5000, /*target_us=*/3000), rate, kA, kK);
    EXPECT_LE(s.max_added_delay_s, 0.003 - kA - kK + 1e-4) << rate;
  }
}

TEST(AdaptiveBatching, IsNoWorseThanTheBestFixedDelayOnMeanLatency) {
  for (double rate : {50.0, 800.0, 2500.0}) {
    const SimResult adaptive = Simulate(Adaptive(5000), rate, kA, kK);
    double best = 1e9;
    for (int64_t delay : {0, 500, 1000, 2000, 5000})
      best = std::min(best, Simulate(Fixed(delay), rate, kA, kK).mean_latency_s);
    EXPECT_LE(adaptive.mean_latency_s, best * 1.05) << "rate " << rate;
  }
}

// A model fitted on 400 batches of 1-32 rows costing `fixed_s` + `per_row_s`
// a row, then 3000 rows arriving at `rate` rows/s, `rows` queued. Returns the
// planned wait, counted from the decision; nullopt = send now. `utilization`:
// the CPU utilization the decision weighed.
std::optional<Duration> Decide(double fixed_s, double per_row_s, double rate, int64_t rows,
                               uint64_t max_delay_us = 5000, CpuLoad* cpu = nullptr, bool cpu_aware = false,
                               double* utilization = nullptr) {
  AdaptiveBatchingSpec spec;
  spec.enabled = true;
  spec.max_delay_us = max_delay_us;
  spec.cpu_aware = cpu_aware;
  AdaptiveBatching a(spec, 64, /*positions=*/false, cpu);
  for (int i = 0; i < 400; ++i) a.OnExecution(1 + i % 32, 1, Secs(fixed_s + per_row_s * (1 + i % 32)));
  TimePoint t = kT0;
  for (int i = 0; i < 3000; ++i) a.OnArrival(t += Secs(1.0 / rate), 0, 1);
  std::optional<TimePoint> at = a.WaitUntil(t, t, 0, rows, 1);
  if (utilization) *utilization = a.estimates(t).cpu_utilization;
  if (!at) return std::nullopt;
  EXPECT_GE(*at - t, Secs(200e-6));
  EXPECT_LE(*at - t, Secs(max_delay_us * 1e-6));
  return *at - t;
}

// tiny_mlp at 70% of a 2-core box's capacity: 40 us per batch + 2 us per row,
// 29,500 rows/s, 4 rows ready. By latency alone waiting never pays; on a busy
// machine the CPU a bigger batch saves does.
std::optional<Duration> DecideLikeTinyMlp(CpuLoad* cpu, bool cpu_aware, double* utilization = nullptr) {
  return Decide(40e-6, 2e-6, 29500, 4, /*max_delay_us=*/2000, cpu, cpu_aware, utilization);
}

TEST(AdaptiveBatching, WaitsForBiggerBatchesOnlyWhenTheCpusAreBusy) {
  FixedCpuLoad cpu;
  EXPECT_FALSE(DecideLikeTinyMlp(nullptr, true));
  cpu.Set(0.0);
  EXPECT_FALSE(DecideLikeTinyMlp(&cpu, true));
  cpu.Set(0.5);
  EXPECT_FALSE(DecideLikeTinyMlp(&cpu, true));
  cpu.Set(0.9);
  double u = 0;
  std::optional<Duration> wait = DecideLikeTinyMlp(&cpu, true, &u);
  ASSERT_TRUE(wait);
  EXPECT_EQ(u, 0.9);
  // Sent at once, the ~59 rows of a 2 ms wait would run as ~47 batches of
  // 1.25 rows (one per 42 us execution): waiting most of the budget pays.
  EXPECT_GT(*wait, Secs(1000e-6));
  EXPECT_FALSE(DecideLikeTinyMlp(&cpu, /*cpu_aware=*/false, &u));  // batching.cpu_aware false
  EXPECT_EQ(u, 0);
  cpu.Set(1.0);  // capped: still a bounded wait
  EXPECT_TRUE(DecideLikeTinyMlp(&cpu, true));
}

TEST(AdaptiveBatching, NeverWaitsWhenTheFixedCostIsBelowTheShortestWait) {
  // A wait of w >= 200 us saves at most the fixed cost per batch merged, so
  // with 190 us it cannot pay at any load; with 1 ms it does at some.
  bool waited_1ms = false;
  for (double rate : {500.0, 2000.0, 10000.0, 50000.0, 200000.0}) {
    for (int64_t rows : {1, 4, 16}) {
      EXPECT_FALSE(Decide(190e-6, 20e-6, rate, rows)) << rate << " " << rows;
      EXPECT_FALSE(Decide(190e-6, 0, rate, rows)) << rate << " " << rows;
      waited_1ms |= Decide(1e-3, 20e-6, rate, rows).has_value();
    }
  }
  EXPECT_TRUE(waited_1ms);
}

TEST(AdaptiveBatching, AQuietMachineLeavesTheLowLoadDecisionAlone) {
  // 20 rows/s on a machine 30% busy, cpu_aware on: each request runs alone,
  // at once.
  FixedCpuLoad cpu(0.3);
  BatchPolicy policy = Adaptive(5000);
  policy.adaptive.cpu_aware = true;
  policy.max_queue_size = 64;
  BatchQueue q(policy, &cpu);
  for (int i = 0; i < 400; ++i) q.RecordExecution(1 + i % 32, 1, Secs(kA + kK * (1 + i % 32)));
  TimePoint t = kT0;
  for (int i = 0; i < 20; ++i) {
    auto p = testing::Pending(1);
    ASSERT_TRUE(q.Push(p, t += Secs(0.05)).ok());  // 20 rows/s
    BatchQueue::Decision d = q.Next(t);
    EXPECT_EQ(d.batch.size(), 1u) << i;
  }
}

}  // namespace
}  // namespace inferd

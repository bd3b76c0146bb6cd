#include "bench/host_stall_probe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>

namespace inferd::bench {
namespace {

// A unit every 5 ms from 0 to 3 s, with the CPU time `cpu_at` gives and 2 us more of wall time.
std::vector<ProbeUnit> Units(const std::function<double(double)>& cpu_at) {
  std::vector<ProbeUnit> u;
  for (int i = 0; i < 600; ++i) {
    const double t = i * 0.005;
    const double cpu = cpu_at(t);
    u.push_back({t, cpu + 2, cpu});
  }
  return u;
}

TEST(HostStallProbe, FindsAndMergesRunsOfSlowUnits) {
  // Slow (10x) from 1.0 to 1.1 s and in the one unit at 2.0 s.
  auto units =
      Units([](double t) { return (t >= 1.0 - 1e-9 && t < 1.1 - 1e-9) || std::abs(t - 2.0) < 1e-9 ? 400 : 40; });
  const auto stalls = FindStalls(units, 3, 0.02);
  ASSERT_EQ(stalls.size(), 2u);
  EXPECT_NEAR(stalls[0].start_s, 1.0, 1e-9);
  EXPECT_NEAR(stalls[0].end_s, 1.095 + 402e-6, 1e-9);  // the last slow unit's start plus its wall time
  EXPECT_NEAR(stalls[1].start_s, 2.0, 1e-9);
  EXPECT_NEAR(stalls[1].end_s, 2.0 + 402e-6, 1e-9);
  // Slow units further apart than the merge gap stay separate intervals.
  EXPECT_EQ(FindStalls(units, 3, 0.001).size(), 21u);
  EXPECT_NEAR(StalledSeconds(stalls, 0, 3), 0.095 + 2 * 402e-6, 1e-9);
  EXPECT_NEAR(StalledSeconds(stalls, 1.05, 1.5), 0.045 + 402e-6, 1e-9);  // clipped to the range
}

TEST(HostStallProbe, UnitsOrderDoesNotMatterAndUnsortedInputIsSorted) {
  auto units = Units([](double t) { return t >= 1.0 - 1e-9 && t < 1.02 ? 400 : 40; });
  std::reverse(units.begin(), units.end());
  const auto stalls = FindStalls(units, 3, 0.02);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_NEAR(stalls[0].start_s, 1.0, 1e-9);
}

TEST(HostStallProbe, OnlyCpuTimeCountsNotWallTime) {
  // Preempted by other threads of the machine: wall time long, CPU time usual.
  auto units = Units([](double) { return 40; });
  for (auto& u : units)
    if (u.start_s > 1 && u.start_s < 1.2) u.wall_us = 5000;
  EXPECT_TRUE(FindStalls(units, 3, 0.02).empty());
  // Exactly the factor is not slow; above it is.
  auto edge = Units([](double) { return 40; });
  edge[100].cpu_us = 120;
  EXPECT_TRUE(FindStalls(edge, 3, 0.02).empty());
  edge[100].cpu_us = 121;
  EXPECT_EQ(FindStalls(edge, 3, 0.02).size(), 1u);
  EXPECT_TRUE(FindStalls({}, 3, 0.02).empty());
}

TEST(HostStallProbe, SeesStallsCoveringMostOfTheRun) {
  // The usual unit is the 10th percentile: 80% slow still has fast units to compare with.
  auto units = Units([](double t) { return t < 0.6 - 1e-9 ? 40 : 400; });
  const auto stalls = FindStalls(units, 3, 0.02);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_NEAR(stalls[0].start_s, 0.6, 1e-6);
}

TEST(HostStallProbe, OutsideStallsDropsRequestsSentInAStallOrItsGuard) {
  const std::vector<StallInterval> stalls = {{1.0, 1.1}, {2.0, 2.05}};
  // Sent at end_s - latency: 0.5 (before), 1.0 (at the start), 1.05 (inside), 1.3 (= end + guard),
  // 1.31 (after the guard), 2.3 (after the second stall's guard).
  std::vector<Sample> s = {{0.6, 1e5, true}, {1.2, 2e5, true},  {1.06, 1e4, true},
                           {1.4, 1e5, true}, {1.32, 1e4, true}, {2.4, 1e5, true}};
  const auto out = OutsideStalls(s, stalls, 0.2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_DOUBLE_EQ(out[0].end_s, 0.6);
  EXPECT_DOUBLE_EQ(out[1].end_s, 1.32);
  EXPECT_DOUBLE_EQ(out[2].end_s, 2.4);
  EXPECT_EQ(OutsideStalls(s, {}, 0.2).size(), s.size());
}

TEST(HostStallProbe, SummarizeCountsOnlyTheReportedWindows) {
  // Stalls at 0.5 s (in the warm-up), 1.0-1.1 s and 2.0 s; the windows are [0.8, 2.5).
  auto units = Units([](double t) {
    return std::abs(t - 0.5) < 1e-9 || (t >= 1.0 - 1e-9 && t < 1.1 - 1e-9) || std::abs(t - 2.0) < 1e-9 ? 400 : 40;
  });
  std::vector<Sample> samples;
  for (int i = 0; i < 300; ++i) samples.push_back({0.01 * i + 0.006, 1000, true});  // sent at 5, 15, 25 ... ms
  const HostStalls h = SummarizeStalls(units, samples, 0.8, 2.5, 0.1);
  EXPECT_TRUE(h.probed);
  EXPECT_EQ(h.stalls.size(), 3u);  // all of them, warm-up included
  EXPECT_EQ(h.count, 2);
  EXPECT_NEAR(h.stalled_s, 0.095 + 2 * 402e-6, 1e-9);
  EXPECT_DOUBLE_EQ(h.guard_s, 0.1);
  // In [0.8, 2.5): 170 samples; left out: the 20 sent in [1.0, 1.095 + guard] and the 10 in [2.0, 2.0 + guard].
  EXPECT_EQ(Summarize(samples, 0.8, 2.5).requests, 170u);
  EXPECT_EQ(h.outside.requests, 140u);
}

TEST(HostStallProbe, ProbeTimesUnitsUntilStopped) {
  const auto t0 = std::chrono::steady_clock::now();
  HostStallProbe probe(t0, {std::chrono::microseconds(1000), 1000});
  const auto units = probe.Stop();
  ASSERT_GE(units.size(), 1u);
  for (size_t i = 0; i < units.size(); ++i) {
    EXPECT_GT(units[i].cpu_us, 0);
    EXPECT_GT(units[i].wall_us, 0);
    EXPECT_GE(units[i].start_s, 0);
    if (i) EXPECT_GT(units[i].start_s, units[i - 1].start_s);
  }
  EXPECT_EQ(probe.Stop().size(), units.size());  // stopping again is harmless
}

}  // namespace
}  // namespace inferd::bench

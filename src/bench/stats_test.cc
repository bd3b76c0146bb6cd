#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace inferd::bench {
namespace {

TEST(BenchStats, NearestRankPercentiles) {
  std::vector<double> v(100);
  std::iota(v.begin(), v.end(), 1.0);  // 1..100, shuffled order must not matter
  std::reverse(v.begin(), v.end());
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(v, 90), 90);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 100), 100);
  EXPECT_EQ(Percentile({7}, 99), 7);
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({1, 2, 3, 4}, 50), 2);
}

TEST(BenchStats, SummarizeCountsOnlyTheWindowAndSeparatesErrors) {
  std::vector<Sample> s;
  for (int i = 0; i < 10; ++i) s.push_back({0.1 * i + 0.05, 100.0 + i, true});  // 0.05 .. 0.95
  s.push_back({0.5, 1e6, false});
  s.push_back({1.5, 1.0, true});  // outside
  Summary w = Summarize(s, 0.0, 1.0);
  EXPECT_EQ(w.requests, 10u);
  EXPECT_EQ(w.errors, 1u);
  EXPECT_DOUBLE_EQ(w.throughput, 10.0);
  EXPECT_EQ(w.max_us, 109);
  EXPECT_EQ(w.p50_us, 104);
  EXPECT_DOUBLE_EQ(w.mean_us, 104.5);
}

TEST(BenchStats, StabilityNeedsThreeCloseWindows) {
  auto win = [](double tp, double p50) {
    Summary s;
    s.requests = 10;
    s.throughput = tp;
    s.p50_us = p50;
    return s;
  };
  EXPECT_FALSE(IsStable({win(100, 50), win(101, 50)}, 3, 0.1));
  EXPECT_TRUE(IsStable({win(10, 500), win(100, 50), win(105, 52), win(98, 49)}, 3, 0.1));
  EXPECT_FALSE(IsStable({win(100, 50), win(130, 50), win(100, 50)}, 3, 0.1));  // throughput off
  EXPECT_FALSE(IsStable({win(100, 50), win(100, 80), win(100, 50)}, 3, 0.1));  // latency off
  Summary empty;
  EXPECT_FALSE(IsStable({empty, empty, empty}, 3, 0.1));
}

TEST(BenchStats, PoissonArrivalsHaveTheRequestedRateAndExponentialGaps) {
  const auto a = PoissonArrivals(1000, 20, 42);
  EXPECT_NEAR(static_cast<double>(a.size()) / 20.0, 1000, 30);  // ~4 sigma
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  // Exponential gaps: mean 1 ms, and P(gap > mean) = e^-1.
  double sum = 0;
  int longer = 0;
  for (size_t i = 1; i < a.size(); ++i) {
    const double g = a[i] - a[i - 1];
    sum += g;
    longer += g > 1e-3;
  }
  const double n = static_cast<double>(a.size() - 1);
  EXPECT_NEAR(sum / n, 1e-3, 5e-5);
  EXPECT_NEAR(longer / n, std::exp(-1.0), 0.02);
  EXPECT_EQ(a, PoissonArrivals(1000, 20, 42));  // deterministic
  EXPECT_TRUE(PoissonArrivals(0, 1, 1).empty());
}

}  // namespace
}  // namespace inferd::bench

#include "tune/hill_climb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace inferd::tune {
namespace {

std::vector<Dimension> ClimbGrid(int a, int b, int c) {
  auto dim = [](const std::string& name, int n, bool ordered) {
    Dimension d{name, {}, ordered};
    for (int i = 0; i < n; ++i) d.values.push_back(std::to_string(i));
    return d;
  };
  return {dim("a", a, true), dim("b", b, true), dim("c", c, false)};
}

// A separable, single-peaked throughput: the best is (5, 2, 3), each step towards it 25% or more.
Score ClimbPeak(const Point& p) {
  const double t = 1000 * std::pow(0.8, std::abs(p[0] - 5)) * std::pow(0.7, std::abs(p[1] - 2)) * (p[2] == 3 ? 1 : 0.5);
  return {true, t, 1.0};
}

TEST(HillClimbTest, FindsThePeakWithoutTheFullGrid) {
  const auto dims = ClimbGrid(8, 6, 5);
  int calls = 0;
  std::set<Point> seen;
  auto r = HillClimb(dims, {0, 0, 0},
                     [&](const Point& p) {
                       ++calls;
                       EXPECT_TRUE(seen.insert(p).second) << "a point measured twice";
                       return ClimbPeak(p);
                     },
                     {});
  EXPECT_EQ(r.best, (Point{5, 2, 3}));
  EXPECT_EQ(r.stop_reason, "converged");
  EXPECT_EQ(r.best_score.throughput, 1000);
  EXPECT_EQ(calls, static_cast<int>(r.evaluations.size()));
  EXPECT_LT(calls, 8 * 6 * 5 / 4);
  EXPECT_EQ(r.evaluations.front().point, (Point{0, 0, 0}));
}

TEST(HillClimbTest, SmallGainsDoNotMove) {
  const auto dims = ClimbGrid(4, 1, 1);
  // Each step up is 3% better: below a 5% min_gain, so the start stays.
  auto r = HillClimb(dims, {0, 0, 0}, [](const Point& p) { return Score{true, 100 * std::pow(1.03, p[0]), 1}; }, {});
  EXPECT_EQ(r.best, (Point{0, 0, 0}));
  EXPECT_EQ(r.evaluations.size(), 2u);  // the start and its one neighbour
  SearchOptions o;
  o.min_gain = 0.01;
  r = HillClimb(
      dims, {0, 0, 0},
      [](const Point& p) {
        return Score{true, 100 * std::pow(1.03, p[0]), 1};
      },
      o);
  EXPECT_EQ(r.best, (Point{3, 0, 0}));
}

TEST(HillClimbTest, FeasibleBeatsInfeasibleAndLatencyRanksInfeasible) {
  EXPECT_TRUE(Beats({true, 1, 50}, {false, 1e6, 0.1}, 0.05));
  EXPECT_FALSE(Beats({false, 1e6, 0.1}, {true, 1, 50}, 0.05));
  EXPECT_TRUE(Beats({false, 0, 10}, {false, 0, 20}, 0.05));
  EXPECT_FALSE(Beats({false, 0, 10}, {false, 0, 10.2}, 0.05));
  // From an infeasible start the climb walks towards lower latency, then throughput.
  const auto dims = ClimbGrid(6, 1, 1);
  auto r = HillClimb(dims, {0, 0, 0},
                     [](const Point& p) {
                       return p[0] < 3 ? Score{false, 0, 10.0 - p[0]} : Score{true, 100.0 * p[0], 1};
                     },
                     {});
  EXPECT_EQ(r.best, (Point{5, 0, 0}));
  EXPECT_TRUE(r.best_score.feasible);
}

TEST(HillClimbTest, BudgetsAndDisallowedPointsStopOrSkip) {
  const auto dims = ClimbGrid(8, 6, 5);
  SearchOptions o;
  o.max_evaluations = 4;
  auto r = HillClimb(dims, {0, 0, 0}, ClimbPeak, o);
  EXPECT_EQ(r.evaluations.size(), 4u);
  EXPECT_EQ(r.stop_reason, "evaluation budget");
  EXPECT_TRUE(ClimbPeak(r.best).throughput >= ClimbPeak({0, 0, 0}).throughput);

  int clock = 0;
  o = {};
  o.out_of_time = [&] { return ++clock > 3; };
  r = HillClimb(dims, {0, 0, 0}, ClimbPeak, o);
  EXPECT_EQ(r.stop_reason, "time budget");
  EXPECT_EQ(r.evaluations.size(), 3u);

  o = {};
  o.allowed = [](const Point& p) { return p[0] <= 3; };
  r = HillClimb(dims, {0, 0, 0}, ClimbPeak, o);
  EXPECT_EQ(r.best[0], 3);
  for (const auto& e : r.evaluations) EXPECT_LE(e.point[0], 3);
}

}  // namespace
}  // namespace inferd::tune

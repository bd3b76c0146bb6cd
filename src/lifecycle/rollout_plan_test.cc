#include "lifecycle/rollout_plan.h"

#include <gtest/gtest.h>

#include <cmath>

namespace inferd {
namespace {

using std::chrono::seconds;

RolloutSpec Spec() {
  RolloutSpec s;
  s.version = "4";
  s.steps = {5, 25, 50, 100};
  s.interval = seconds(10);
  s.min_requests = 100;
  return s;
}

IntervalStats Good(uint64_t n = 1000) { return IntervalStats{n, 0, 900, std::nullopt}; }

TEST(RolloutPlan, AGoodVersionIsPromotedThroughEveryStep) {
  TimePoint t{};
  RolloutState s = StartRollout(Spec(), t);
  EXPECT_EQ(s.canary_percent(), 5u);
  for (uint32_t want : {25u, 50u, 100u}) {
    t += seconds(10);
    s = JudgeInterval(s, Good(), Good(), t);
    EXPECT_EQ(s.phase, RolloutPhase::kRunning);
    EXPECT_EQ(s.canary_percent(), want);
  }
  t += seconds(10);
  s = JudgeInterval(s, Good(), Good(), t);
  EXPECT_EQ(s.phase, RolloutPhase::kPromoted);
  EXPECT_EQ(s.canary_percent(), 100u);
  EXPECT_EQ(s.events.back().what, "promoted");
  EXPECT_EQ(s.events.size(), 5u);  // 4 steps + promoted
  // Finished: nothing changes it any more.
  RolloutState again = JudgeInterval(s, IntervalStats{1000, 1000, 1, std::nullopt}, Good(), t + seconds(10));
  EXPECT_EQ(again.phase, RolloutPhase::kPromoted);
}

TEST(RolloutPlan, EachFailingCheckRollsBackAtOnceWithTheNumbers) {
  struct Case {
    IntervalStats canary;
    const char* why;
  } cases[] = {
      {{1000, 120, 900, std::nullopt}, "error rate 0.120 vs stable 0.000 (max +0.010)"},
      {{1000, 0, 9000, std::nullopt}, "p99 9000 us vs stable 900 us in the same interval (max x1.50)"},
      {{1000, 0, 900, 0.5}, "outputs agree on 0.500 of compared requests (min 0.990)"},
      // Errors count even before the canary has its minimum of requests.
      {{40, 30, 900, std::nullopt}, "error rate 0.750"},
  };
  for (const auto& c : cases) {
    TimePoint t{};
    RolloutState s = StartRollout(Spec(), t);
    s = JudgeInterval(s, Good(), Good(), t + seconds(10));  // step 2
    s = JudgeInterval(s, c.canary, Good(), t + seconds(20));
    EXPECT_EQ(s.phase, RolloutPhase::kRolledBack) << c.why;
    EXPECT_EQ(s.canary_percent(), 0u);
    EXPECT_NE(s.reason.find(c.why), std::string::npos) << s.reason;
    EXPECT_NE(s.events.back().what.find("rolled back: "), std::string::npos);
  }
}

TEST(RolloutPlan, TooFewCanaryRequestsWaitAtTheSameStep) {
  TimePoint t{};
  RolloutState s = StartRollout(Spec(), t);
  s = JudgeInterval(s, Good(30), Good(), t + seconds(10));
  EXPECT_EQ(s.phase, RolloutPhase::kRunning);
  EXPECT_EQ(s.canary_percent(), 5u);
  EXPECT_EQ(s.step_started, t + seconds(10));
  EXPECT_EQ(s.events.back().what, "waiting: 30 of 100 canary requests");
  // A slow canary with too few requests is not judged on p99 yet.
  s = JudgeInterval(s, IntervalStats{10, 0, 90000, std::nullopt}, Good(), t + seconds(20));
  EXPECT_EQ(s.phase, RolloutPhase::kRunning);
}

// Latency is judged only on canary and stable measured over the same
// interval: never against stable's p99 from an earlier step.
TEST(RolloutPlan, LatencyIsComparedWithinTheSameIntervalOnly) {
  TimePoint t{};
  RolloutState s = StartRollout(Spec(), t);
  // 5%: stable fast (900 us) while the machine was quiet.
  s = JudgeInterval(s, Good(), IntervalStats{1000, 0, 900, std::nullopt}, t + seconds(10));
  EXPECT_EQ(s.phase, RolloutPhase::kRunning);
  // 25%: the machine got slower for both: canary 2000 us vs stable 1600 us of the same interval passes
  // (it would fail against the 900 us of the earlier step).
  s = JudgeInterval(s, IntervalStats{1000, 0, 2000, std::nullopt}, IntervalStats{1000, 0, 1600, std::nullopt},
                    t + seconds(20));
  EXPECT_EQ(s.phase, RolloutPhase::kRunning) << s.reason;
  // 50%: stable had too few requests to measure: the step's p99 is not judged, and says so.
  s = JudgeInterval(s, IntervalStats{1000, 0, 2700, std::nullopt}, IntervalStats{5, 0, 300, std::nullopt},
                    t + seconds(25));
  EXPECT_EQ(s.phase, RolloutPhase::kRunning);
  ASSERT_GE(s.events.size(), 2u);
  EXPECT_EQ(s.events[s.events.size() - 2].what.rfind("p99 not compared: stable had 5 of 100 requests", 0), 0u)
      << s.events[s.events.size() - 2].what;
  EXPECT_EQ(s.canary_percent(), 100u);
  // Measured together, a canary 3x stable fails, with both numbers in the reason.
  s = JudgeInterval(s, IntervalStats{1000, 0, 2700, std::nullopt}, IntervalStats{1000, 0, 900, std::nullopt},
                    t + seconds(30));
  EXPECT_EQ(s.phase, RolloutPhase::kRolledBack);
  EXPECT_NE(s.reason.find("p99 2700 us vs stable 900 us in the same interval"), std::string::npos) << s.reason;
}

// With a floor, a canary fails the p99 check only when slower by both the ratio and the floor.
TEST(RolloutPlan, AP99FloorLetsASmallAbsoluteIncreasePass) {
  RolloutSpec spec = Spec();
  spec.checks.min_p99_increase_ms = 5;
  TimePoint t{};
  RolloutState s = StartRollout(spec, t);
  // 3x stable but only 2 ms more: passes.
  s = JudgeInterval(s, IntervalStats{1000, 0, 3000, std::nullopt}, IntervalStats{1000, 0, 1000, std::nullopt},
                    t + seconds(10));
  EXPECT_EQ(s.phase, RolloutPhase::kRunning) << s.reason;
  EXPECT_EQ(s.canary_percent(), 25u);
  // 6 ms more but only x1.2: passes.
  s = JudgeInterval(s, IntervalStats{1000, 0, 36000, std::nullopt}, IntervalStats{1000, 0, 30000, std::nullopt},
                    t + seconds(20));
  EXPECT_EQ(s.phase, RolloutPhase::kRunning) << s.reason;
  // 7x and 6 ms more: rolled back, the floor in the reason.
  s = JudgeInterval(s, IntervalStats{1000, 0, 7000, std::nullopt}, IntervalStats{1000, 0, 1000, std::nullopt},
                    t + seconds(30));
  EXPECT_EQ(s.phase, RolloutPhase::kRolledBack);
  EXPECT_EQ(s.reason, "p99 7000 us vs stable 1000 us in the same interval (max x1.50 or +5.0 ms)");
}

TEST(RolloutPlan, AnAbortEndsARunningRolloutOnly) {
  TimePoint t{};
  RolloutState s = AbortRollout(StartRollout(Spec(), t), "version 4 was removed from the repository", t);
  EXPECT_EQ(s.phase, RolloutPhase::kAborted);
  EXPECT_EQ(s.canary_percent(), 0u);
  EXPECT_EQ(s.events.back().what, "aborted: version 4 was removed from the repository");
}

TEST(RolloutPlan, SpecsAreValidated) {
  EXPECT_TRUE(ValidateRolloutSpec(Spec()).ok());
  auto bad = [](auto edit) {
    RolloutSpec s = Spec();
    edit(s);
    return ValidateRolloutSpec(s);
  };
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.steps = {5, 25, 50}; }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.steps = {25, 5, 100}; }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.steps = {0, 100}; }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.interval = seconds(-1); }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.version.clear(); }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.checks.max_p99_ratio = 0.5; }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.checks.min_p99_increase_ms = -1; }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.checks.min_p99_increase_ms = std::nan(""); }).ok());
  EXPECT_FALSE(bad([](RolloutSpec& s) { s.checks.min_agreement = 2; }).ok());
}

}  // namespace
}  // namespace inferd

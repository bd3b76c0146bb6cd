#include "lifecycle/traffic_policy.h"

#include <gtest/gtest.h>

namespace inferd {
namespace {

TrafficPolicy Split9010() {
  auto p = ParseTrafficPolicyJson(R"({"split": {"stable": 90, "canary": 10}, "sticky_key": "user_id",
                                      "shadow": {"target": "3", "percent": 10}})");
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : TrafficPolicy{};
}

TEST(TrafficPolicy, ParsesAndWritesBackTheApiForm) {
  TrafficPolicy p = Split9010();
  ASSERT_EQ(p.split.size(), 2u);
  EXPECT_EQ(p.split[0].target, "stable");
  EXPECT_EQ(p.split[1].weight, 10u);
  EXPECT_EQ(p.sticky_key, "user_id");
  EXPECT_EQ(p.shadow_target, "3");
  auto again = ParseTrafficPolicyJson(TrafficPolicyToJson(p));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(TrafficPolicyToJson(*again), TrafficPolicyToJson(p));
  EXPECT_TRUE(ParseTrafficPolicyJson("{}")->empty());
}

TEST(TrafficPolicy, RejectsMalformedPoliciesNamingTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"split": {"a": 90, "b": 5}})", "sum to 95"},
      {R"({"split": {"a": 90, "b": -10}})", "integer 0..100"},
      {R"({"split": {"a": 50.5, "b": 49.5}})", "integer 0..100"},
      {R"({"split": {"a": 101}})", "integer 0..100"},
      {R"({"split": [90, 10]})", "object"},
      {R"({"split": {"a": 100}, "weights": 1})", "'weights' is not a field"},
      {R"({"shadow": {"target": "b", "percent": 150}})", "0..100"},
      {R"({"shadow": {"percent": 5}})", "needs a target"},
      {R"({"sticky_key": 3})", "string"},
      {"[1]", "not a JSON object"},
      {"{", "not a JSON object"},
  };
  for (const auto& [json, why] : cases) {
    auto p = ParseTrafficPolicyJson(json);
    ASSERT_FALSE(p.ok()) << json;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(why), std::string::npos) << json << ": " << p.status().message();
  }
}

TEST(TrafficPolicy, ReadsTheConfigParameters) {
  auto p = TrafficPolicyFromParameters(
      {{"traffic.split", "stable=90, canary=10"}, {"traffic.sticky_key", "user"}, {"traffic.shadow", "canary=25"}});
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->has_value());
  EXPECT_EQ((*p)->split[1].target, "canary");
  EXPECT_EQ((*p)->shadow_percent, 25);
  EXPECT_FALSE(TrafficPolicyFromParameters({{"other", "x"}})->has_value());
  for (const char* bad : {"stable=90,canary=20", "stable=90,", "stable", "a=x,b=100", "a=50,a=50"}) {
    auto r = TrafficPolicyFromParameters({{"traffic.split", bad}});
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_NE(r.status().message().find("traffic.split"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(TrafficPolicyFromParameters({{"traffic.shadow", "a=5,b=5"}}).ok());
}

TEST(TrafficPolicy, RandomDrawsFollowTheWeightsAmongServingTargetsOnly) {
  TrafficPolicy p = Split9010();
  int counts[2] = {0, 0};
  const int n = 100000;
  for (int i = 0; i < n; ++i) ++counts[*PickSplit(p, {true, true}, std::nullopt, (i + 0.5) / n)];
  EXPECT_NEAR(counts[1], n / 10, n / 1000);
  // A target that does not serve gets nothing; its share goes to the other.
  for (double r : {0.0, 0.5, 0.95, 0.999}) EXPECT_EQ(PickSplit(p, {true, false}, std::nullopt, r), 0u);
  for (double r : {0.0, 0.5, 0.95, 0.999}) EXPECT_EQ(PickSplit(p, {false, true}, std::nullopt, r), 1u);
  EXPECT_FALSE(PickSplit(p, {false, false}, std::nullopt, 0.5).has_value());
}

TEST(TrafficPolicy, AStickyKeyKeepsItsTargetAndOnlyAnUnservingTargetsKeysMove) {
  TrafficPolicy p = Split9010();
  int canary = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const std::string key = "user-" + std::to_string(i);
    auto first = PickSplit(p, {true, true}, key, 0.0);
    ASSERT_TRUE(first.has_value());
    EXPECT_EQ(PickSplit(p, {true, true}, key, 0.99), first) << key;  // the random draw plays no part
    canary += *first == 1;
    // The canary stops serving: stable's keys stay where they were.
    EXPECT_EQ(*PickSplit(p, {true, false}, key, 0.0), 0u);
    // A rollout step (canary 10 -> 25): canary's keys stay; only stable's move, never the other way.
    if (*first == 1) {
      TrafficPolicy more = p;
      more.split[0].weight = 75;
      more.split[1].weight = 25;
      EXPECT_EQ(*PickSplit(more, {true, true}, key, 0.0), 1u) << key;
    }
  }
  EXPECT_NEAR(canary, n / 10, n / 50);  // within 2 points of 10%
}

TEST(TrafficPolicy, ShadowsAShareDeterministicallyForAKey) {
  TrafficPolicy p = Split9010();
  int shadowed = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) shadowed += PickShadow(p, std::nullopt, (i + 0.5) / n);
  EXPECT_NEAR(shadowed, n / 10, 2);
  int keyed = 0;
  for (int i = 0; i < n; ++i) {
    const std::string key = "k" + std::to_string(i);
    const bool s = PickShadow(p, key, 0.0);
    EXPECT_EQ(PickShadow(p, key, 0.99), s);
    keyed += s;
  }
  EXPECT_NEAR(keyed, n / 10, n / 50);
  TrafficPolicy none;
  EXPECT_FALSE(PickShadow(none, std::nullopt, 0.0));
}

}  // namespace
}  // namespace inferd

#include <gtest/gtest.h>

#include <atomic>

#include "routing/routing_policy.h"

namespace inferd {
namespace {

// Versions 1 (stable) and 2 (canary) serve; the policy splits 90/10 and
// mirrors 20% to version 3 when it serves. Version objects are not needed to
// test the choice: Route::version_number says it.
ServingModel Model(bool canary_serves = true, bool shadow_serves = true) {
  ServingModel m;
  m.name = "m";
  m.versions[1] = nullptr;
  if (canary_serves) m.versions[2] = nullptr;
  if (shadow_serves) m.versions[3] = nullptr;
  m.default_version = 1;
  m.labels.labels = {{"stable", 1}, {"canary", 2}};
  auto p = std::make_shared<TrafficPolicy>();
  p->split = {{"stable", 90}, {"canary", 10}};
  p->sticky_key = "user";
  p->shadow_target = "3";
  p->shadow_percent = 20;
  m.traffic = p;
  return m;
}

// An evenly spread sequence of draws.
std::function<double()> Sweep(int n) {
  auto i = std::make_shared<std::atomic<int>>(0);
  return [i, n] { return ((i->fetch_add(1) % n) + 0.5) / n; };
}

TEST(TrafficRoutingPolicy, SplitsUnaddressedRequestsAndMirrorsAShare) {
  auto policy = MakeTrafficRoutingPolicy(Sweep(1000));
  ServingModel m = Model();
  InferRequest req;
  int canary = 0, shadowed = 0;
  const int n = 10000;
  for (int i = 0; i < n; ++i) {
    auto r = policy->Resolve(m, VersionRef{}, &req);
    ASSERT_TRUE(r.ok()) << r.status().message();
    canary += r->version_number == 2;
    shadowed += r->shadow_number == 3;
  }
  EXPECT_NEAR(canary, n / 10, n / 50);
  EXPECT_NEAR(shadowed, n / 5, n / 50);
}

TEST(TrafficRoutingPolicy, ExplicitVersionsLabelsAndMetadataBypassThePolicy) {
  auto policy = MakeTrafficRoutingPolicy(Sweep(10));
  ServingModel m = Model();
  InferRequest req;
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(policy->Resolve(m, *VersionRef::Parse("2"), &req)->version_number, 2);
    auto labelled = policy->Resolve(m, VersionRef::Label("stable"), &req);
    EXPECT_EQ(labelled->version_number, 1);
    EXPECT_EQ(labelled->shadow_number, 0);
    EXPECT_EQ(policy->Resolve(m, VersionRef{}, nullptr)->version_number, 1);  // metadata: the default
  }
}

TEST(TrafficRoutingPolicy, AStickyParameterAlwaysReachesTheSameVersion) {
  auto policy = MakeTrafficRoutingPolicy(Sweep(7));
  ServingModel m = Model();
  int canary = 0;
  for (int u = 0; u < 2000; ++u) {
    InferRequest req;
    req.parameters["user"] = std::string("u") + std::to_string(u);
    const int64_t first = policy->Resolve(m, VersionRef{}, &req)->version_number;
    for (int k = 0; k < 5; ++k) EXPECT_EQ(policy->Resolve(m, VersionRef{}, &req)->version_number, first);
    canary += first == 2;
  }
  EXPECT_NEAR(canary, 200, 40);
  InferRequest numeric;
  numeric.parameters["user"] = int64_t{42};
  const int64_t v = policy->Resolve(m, VersionRef{}, &numeric)->version_number;
  for (int k = 0; k < 5; ++k) EXPECT_EQ(policy->Resolve(m, VersionRef{}, &numeric)->version_number, v);
}

TEST(TrafficRoutingPolicy, TheTransportsStickyKeyWinsAndWorksWithoutAParameterName) {
  auto policy = MakeTrafficRoutingPolicy(Sweep(7));
  ServingModel m = Model();
  auto unnamed = std::make_shared<TrafficPolicy>(*m.traffic);
  unnamed->sticky_key.clear();
  m.traffic = unnamed;
  int canary = 0;
  for (int u = 0; u < 2000; ++u) {
    InferRequest req;
    req.sticky_key = "user-" + std::to_string(u);
    const int64_t first = policy->Resolve(m, VersionRef{}, &req)->version_number;
    for (int k = 0; k < 5; ++k) EXPECT_EQ(policy->Resolve(m, VersionRef{}, &req)->version_number, first);
    canary += first == 2;
  }
  EXPECT_NEAR(canary, 200, 40);
  // With both, the header's key decides: the parameter changes nothing.
  ServingModel named = Model();
  InferRequest req;
  req.sticky_key = "alice";
  const int64_t v = policy->Resolve(named, VersionRef{}, &req)->version_number;
  for (int u = 0; u < 50; ++u) {
    req.parameters["user"] = std::string("u") + std::to_string(u);
    EXPECT_EQ(policy->Resolve(named, VersionRef{}, &req)->version_number, v);
  }
}

TEST(TrafficRoutingPolicy, TargetsThatDoNotServeGetNothing) {
  auto policy = MakeTrafficRoutingPolicy(Sweep(100));
  ServingModel m = Model(/*canary_serves=*/false, /*shadow_serves=*/false);
  InferRequest req;
  for (int i = 0; i < 300; ++i) {
    auto r = policy->Resolve(m, VersionRef{}, &req);
    EXPECT_EQ(r->version_number, 1);
    EXPECT_EQ(r->shadow, nullptr);
    EXPECT_EQ(r->shadow_number, 0);
  }
  // A label pointing nowhere serving, and no target at all: the default version.
  ServingModel none = Model();
  none.labels.labels = {};
  auto p = std::make_shared<TrafficPolicy>(*none.traffic);
  p->shadow_target.clear();
  none.traffic = p;
  EXPECT_EQ(policy->Resolve(none, VersionRef{}, &req)->version_number, 1);
}

}  // namespace
}  // namespace inferd

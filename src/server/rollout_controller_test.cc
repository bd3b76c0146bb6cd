#include "server/rollout_controller.h"

#include <gtest/gtest.h>

#include "testing/fake_clock.h"

namespace inferd {
namespace {

using std::chrono::seconds;

// One model, versions 1 (default) and 4; the test feeds each version's traffic.
class FakeHost : public RolloutHost {
 public:
  struct Feed {
    uint64_t requests = 0, errors = 0, agreed = 0, disagreed = 0;
    Histogram latency{Histogram::LatencyMicrosBuckets()};
  };
  std::map<std::string, int64_t> labels;
  std::map<int64_t, std::unique_ptr<Feed>> versions;
  std::optional<TrafficPolicy> traffic;
  int clears = 0;

  FakeHost() {
    versions[1] = std::make_unique<Feed>();
    versions[4] = std::make_unique<Feed>();
  }
  // n requests on version v: `errors` of them failed, the rest took `us`.
  void Serve(int64_t v, uint64_t n, uint64_t errors, double us, uint64_t disagreed = 0) {
    Feed& f = *versions.at(v);
    f.requests += n;
    f.errors += errors;
    for (uint64_t i = errors; i < n; ++i) f.latency.Observe(us);
    f.disagreed += disagreed;
    f.agreed += n - disagreed;
  }

  Result<int64_t> DefaultVersion(const std::string&) override { return 1; }
  Result<int64_t> LabelVersion(const std::string&, const std::string& label) override {
    auto it = labels.find(label);
    if (it == labels.end()) return Status::NotFound("no label " + label);
    return it->second;
  }
  Status SetLabel(const std::string&, const std::string& label, int64_t v) override {
    if (!versions.count(v)) return Status::NotFound("no version " + std::to_string(v));
    labels[label] = v;
    return Status::OK();
  }
  Status DeleteLabel(const std::string&, const std::string& label) override {
    labels.erase(label);
    return Status::OK();
  }
  Status SetTraffic(const std::string&, const TrafficPolicy& p) override {
    traffic = p;
    return Status::OK();
  }
  Status ClearTraffic(const std::string&) override {
    traffic.reset();
    ++clears;
    return Status::OK();
  }
  Result<VersionCounters> Counters(const std::string&, int64_t v) override {
    auto it = versions.find(v);
    if (it == versions.end()) return Status::Unavailable("version " + std::to_string(v) + " does not serve");
    VersionCounters c;
    c.requests = it->second->requests;
    c.errors = it->second->errors;
    c.latency_us = it->second->latency.Take();
    c.shadow_agreed = it->second->agreed;
    c.shadow_disagreed = it->second->disagreed;
    return c;
  }
  std::vector<std::string> ModelNames() override { return {"m"}; }

  uint32_t CanaryPercent() const {
    if (!traffic) return 0;
    for (const auto& s : traffic->split)
      if (s.target == "canary") return s.weight;
    return 0;
  }
};

RolloutRequest Request() {
  auto r = ParseRolloutRequestJson(R"({"version": "4", "steps": [5, 25, 50, 100], "interval_seconds": 10,
                                       "min_requests": 100})");
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *r;
}

class RolloutControllerTest : public ::testing::Test {
 protected:
  FakeHost host_;
  std::unique_ptr<ControlStateStore> store_ = MakeMemoryStateStore();
  inferd::testing::FakeClock clock_;
  RolloutController controller_{&host_, store_.get(), &clock_};

  // One interval of traffic: stable healthy, the canary as given.
  void Interval(uint64_t canary_errors = 0, double canary_us = 1000, uint64_t disagreed = 0) {
    host_.Serve(1, 1000, 0, 1000);
    host_.Serve(4, 1000, canary_errors, canary_us, disagreed);
    clock_.Advance(seconds(10));
    controller_.Tick();
  }
};

TEST_F(RolloutControllerTest, AGoodVersionIsPromotedThroughEveryStep) {
  auto st = controller_.Start("m", Request());
  ASSERT_TRUE(st.ok()) << st.status().message();
  EXPECT_EQ(host_.labels.at("stable"), 1);
  EXPECT_EQ(host_.labels.at("canary"), 4);
  EXPECT_EQ(host_.CanaryPercent(), 5u);
  for (uint32_t want : {25u, 50u, 100u}) {
    Interval();
    EXPECT_EQ(host_.CanaryPercent(), want);
  }
  Interval();
  auto s = controller_.Get("m");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->phase, RolloutPhase::kPromoted);
  EXPECT_EQ(host_.labels.at("stable"), 4);
  EXPECT_EQ(host_.labels.count("canary"), 0u);
  EXPECT_FALSE(host_.traffic.has_value());
  EXPECT_EQ(controller_.counts().promoted, 1u);
}

TEST_F(RolloutControllerTest, ErrorsLatencyOrDisagreementRollBackWithinOneInterval) {
  struct Case {
    uint64_t errors;
    double us;
    uint64_t disagreed;
    const char* why;
  } cases[] = {{200, 1000, 0, "error rate"}, {0, 10000, 0, "p99"}, {0, 1000, 500, "agree"}};
  for (const auto& c : cases) {
    FakeHost host;
    auto store = MakeMemoryStateStore();
    inferd::testing::FakeClock clock;
    RolloutController controller(&host, store.get(), &clock);
    ASSERT_TRUE(controller.Start("m", Request()).ok());
    host.Serve(1, 1000, 0, 1000);
    host.Serve(4, 1000, c.errors, c.us, c.disagreed);
    clock.Advance(seconds(10));
    controller.Tick();
    auto s = controller.Get("m");
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->phase, RolloutPhase::kRolledBack) << c.why;
    EXPECT_NE(s->reason.find(c.why), std::string::npos) << s->reason;
    EXPECT_EQ(host.CanaryPercent(), 0u);
    EXPECT_EQ(host.labels.at("stable"), 1);  // stable stays the default
    EXPECT_EQ(host.labels.count("canary"), 0u);
    EXPECT_EQ(controller.counts().rolled_back, 1u);
  }
}

// Several models, each a FakeHost of its own.
class ModelsHost : public RolloutHost {
 public:
  std::map<std::string, FakeHost> models;
  Result<int64_t> DefaultVersion(const std::string& m) override { return models.at(m).DefaultVersion(m); }
  Result<int64_t> LabelVersion(const std::string& m, const std::string& l) override {
    return models.at(m).LabelVersion(m, l);
  }
  Status SetLabel(const std::string& m, const std::string& l, int64_t v) override {
    return models.at(m).SetLabel(m, l, v);
  }
  Status DeleteLabel(const std::string& m, const std::string& l) override { return models.at(m).DeleteLabel(m, l); }
  Status SetTraffic(const std::string& m, const TrafficPolicy& p) override { return models.at(m).SetTraffic(m, p); }
  Status ClearTraffic(const std::string& m) override { return models.at(m).ClearTraffic(m); }
  Result<VersionCounters> Counters(const std::string& m, int64_t v) override { return models.at(m).Counters(m, v); }
  std::vector<std::string> ModelNames() override {
    std::vector<std::string> names;
    for (const auto& [m, _] : models) names.push_back(m);
    return names;
  }
};

TEST(RolloutControllerModels, ManyModelsRollOutAtOnceEachJudgedOnItsOwn) {
  ModelsHost host;
  for (const char* m : {"a", "b", "c"}) host.models[m];
  auto store = MakeMemoryStateStore();
  inferd::testing::FakeClock clock;
  RolloutController controller(&host, store.get(), &clock);
  for (const char* m : {"a", "b", "c"}) ASSERT_TRUE(controller.Start(m, Request()).ok()) << m;
  EXPECT_EQ(controller.Start("a", Request()).status().code(), StatusCode::kFailedPrecondition);  // one per model
  for (int i = 0; i < 4; ++i) {
    for (const char* m : {"a", "b", "c"}) {
      const bool bad = std::string(m) == "b";
      host.models[m].Serve(1, 1000, 0, 1000);
      if (host.models[m].CanaryPercent() > 0 || i == 0) host.models[m].Serve(4, 1000, bad ? 300 : 0, 1000);
    }
    clock.Advance(seconds(10));
    controller.Tick();
    if (i == 0) {
      EXPECT_EQ(controller.Get("b")->phase, RolloutPhase::kRolledBack);  // b's errors touch only b
      EXPECT_EQ(host.models["a"].CanaryPercent(), 25u);
      EXPECT_EQ(host.models["c"].CanaryPercent(), 25u);
    }
  }
  EXPECT_EQ(controller.Get("a")->phase, RolloutPhase::kPromoted);
  EXPECT_EQ(controller.Get("c")->phase, RolloutPhase::kPromoted);
  EXPECT_EQ(host.models["a"].labels.at("stable"), 4);
  EXPECT_EQ(host.models["b"].labels.at("stable"), 1);
  EXPECT_EQ(controller.counts().promoted, 2u);
  EXPECT_EQ(controller.counts().rolled_back, 1u);
  EXPECT_EQ(controller.All().size(), 3u);
}

TEST_F(RolloutControllerTest, NothingHappensBeforeTheIntervalEnds) {
  ASSERT_TRUE(controller_.Start("m", Request()).ok());
  host_.Serve(4, 1000, 500, 1000);
  clock_.Advance(seconds(9));
  controller_.Tick();
  EXPECT_EQ(controller_.Get("m")->phase, RolloutPhase::kRunning);
}

TEST_F(RolloutControllerTest, AVersionThatStopsServingAbortsTheRollout) {
  ASSERT_TRUE(controller_.Start("m", Request()).ok());
  host_.versions.erase(4);     // removed from the repository
  clock_.Advance(seconds(1));  // the next tick, long before the interval ends
  controller_.Tick();
  auto s = controller_.Get("m");
  EXPECT_EQ(s->phase, RolloutPhase::kAborted);
  EXPECT_NE(s->reason.find("version 4 no longer serves"), std::string::npos) << s->reason;
  EXPECT_FALSE(host_.traffic.has_value());
}

TEST_F(RolloutControllerTest, ARestartResumesAtTheSameStep) {
  ASSERT_TRUE(controller_.Start("m", Request()).ok());
  Interval();  // now at 25%
  RolloutController after_restart(&host_, store_.get(), &clock_);
  host_.traffic.reset();
  after_restart.Resume();
  auto s = after_restart.Get("m");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->phase, RolloutPhase::kRunning);
  EXPECT_EQ(s->canary_percent(), 25u);
  EXPECT_EQ(host_.CanaryPercent(), 25u);
  host_.Serve(1, 1000, 0, 1000);
  host_.Serve(4, 1000, 0, 1000);
  clock_.Advance(seconds(10));
  after_restart.Tick();
  EXPECT_EQ(host_.CanaryPercent(), 50u);
}

TEST_F(RolloutControllerTest, BadRequestsChangeNothing) {
  for (const char* bad : {R"({"version": "4", "steps": [50, 25, 100]})", R"({"version": "4", "interval_seconds": -1})",
                          R"({"version": "4", "steps": [5, 50]})", R"({"version": "x"})", R"({"versions": "4"})",
                          R"({"version": "4", "checks": {"max_p99_ratio": 0.5}})", "nope"}) {
    auto r = ParseRolloutRequestJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  RolloutRequest same = Request();
  same.spec.version = "1";
  EXPECT_FALSE(controller_.Start("m", same).ok());  // already the stable version
  RolloutRequest unknown = Request();
  unknown.spec.version = "9";
  EXPECT_FALSE(controller_.Start("m", unknown).ok());
  EXPECT_FALSE(host_.traffic.has_value());
  ASSERT_TRUE(controller_.Start("m", Request()).ok());
  EXPECT_EQ(controller_.Start("m", Request()).status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace inferd

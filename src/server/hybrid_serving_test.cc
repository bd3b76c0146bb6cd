#include "server/hybrid_serving.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>

#include "jobs/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace inferd {
namespace {

using Kind = HybridServing::Outcome::Kind;
constexpr double kNow = 2'000'000'000;  // injected wall clock (Unix seconds)

PrecomputedSpec Pc() {
  PrecomputedSpec p;
  p.connection = "preds";
  p.table = "digits";
  p.key_column = "id";
  p.outputs = {"y"};
  return p;
}

std::shared_ptr<const ModelSpec> Model(PrecomputedSpec pc) {
  auto m = std::make_shared<ModelSpec>();
  m->name = "m";
  m->max_batch_size = 8;
  m->inputs.push_back(TensorSpec{"x", DataType::kFp32, {2}});
  m->outputs.push_back(TensorSpec{"y", DataType::kFp32, {2}});
  m->precomputed = std::move(pc);
  return m;
}

jobs::StoredPrediction Row(std::string model, std::string version, double at) {
  jobs::StoredPrediction r;
  r.model_name = std::move(model);
  r.model_version = std::move(version);
  r.predicted_at = at;
  return r;
}

TEST(JudgeStored, ModelVersionAndAgeDecide) {
  PrecomputedSpec pc = Pc();
  EXPECT_EQ(JudgeStored(Row("m", "2", 0), pc, "m", "2", kNow), StoredVerdict::kFresh);
  EXPECT_EQ(JudgeStored(Row("other", "2", 0), pc, "m", "2", kNow), StoredVerdict::kOtherModel);
  EXPECT_EQ(JudgeStored(Row("m", "1", 0), pc, "m", "2", kNow), StoredVerdict::kOtherVersion);
  pc.any_version = true;
  EXPECT_EQ(JudgeStored(Row("m", "1", 0), pc, "m", "2", kNow), StoredVerdict::kFresh);
  pc.max_age_seconds = 60;
  EXPECT_EQ(JudgeStored(Row("m", "1", kNow - 60), pc, "m", "2", kNow), StoredVerdict::kFresh);
  EXPECT_EQ(JudgeStored(Row("m", "1", kNow - 61), pc, "m", "2", kNow), StoredVerdict::kTooOld);
}

TEST(HybridKey, FromAParameterOrAnInput) {
  PrecomputedSpec pc = Pc();
  pc.key_parameter = "id";
  InferRequest r;
  EXPECT_FALSE(HybridKey(pc, r, 1)->has_value());  // no key: plain online
  r.parameters["id"] = std::string("user-7");
  EXPECT_EQ(HybridKey(pc, r, 1)->value(), "user-7");
  r.parameters["id"] = int64_t{42};
  EXPECT_EQ(HybridKey(pc, r, 1)->value(), "42");
  EXPECT_EQ(HybridKey(pc, r, 2).status().code(), StatusCode::kInvalidArgument);  // a key names one row
  r.parameters["id"] = true;
  EXPECT_EQ(HybridKey(pc, r, 1).status().code(), StatusCode::kInvalidArgument);
  r.parameters["id"] = std::string();
  EXPECT_EQ(HybridKey(pc, r, 1).status().code(), StatusCode::kInvalidArgument);
  r.parameters["id"] = std::string(2000, 'k');
  EXPECT_EQ(HybridKey(pc, r, 1).status().code(), StatusCode::kInvalidArgument);

  pc.key_input = "uid";
  InferRequest in;
  const int64_t uid = 123456789012;
  auto buf = std::make_shared<std::string>(reinterpret_cast<const char*>(&uid), sizeof uid);
  in.inputs.push_back(Tensor::Own("uid", DataType::kInt64, {1, 1}, buf));
  EXPECT_EQ(HybridKey(pc, in, 1)->value(), "123456789012");
  EXPECT_FALSE(HybridKey(pc, in, 2)->has_value());  // a batch of keys runs online
  std::string bytes;
  const uint32_t len = 3;
  bytes.append(reinterpret_cast<const char*>(&len), 4).append("abc");
  InferRequest text;
  text.inputs.push_back(Tensor::Own("uid", DataType::kBytes, {1, 1}, std::make_shared<std::string>(bytes)));
  EXPECT_EQ(HybridKey(pc, text, 1)->value(), "abc");
}

TEST(StoreCanAnswer, OnlyStoredOutputsWithoutClassification) {
  PrecomputedSpec pc = Pc();
  InferRequest r;
  EXPECT_TRUE(StoreCanAnswer(pc, r));  // every output
  r.outputs.push_back(RequestedOutput{"y"});
  EXPECT_TRUE(StoreCanAnswer(pc, r));
  r.outputs[0].classification = 2;
  EXPECT_FALSE(StoreCanAnswer(pc, r));
  r.outputs[0] = RequestedOutput{"z"};
  EXPECT_FALSE(StoreCanAnswer(pc, r));
}

class HybridServingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = jobs::ParseJobsConfig(R"({"connections": {"preds": {"type": "sqlite", "path": ")" + dir_.Join("p.db") +
                                   R"("}, "other": {"type": "postgres", "conninfo": "host=/nowhere"}}})");
    ASSERT_TRUE(c.ok()) << c.status().message();
    stores_ = std::make_unique<jobs::JobStores>(*c);
    auto plant = jobs::OpenSqliteStore(dir_.Join("p.db"), jobs::StoreTable{"digits", "id", {"y"}}, true);
    ASSERT_TRUE(plant.ok()) << plant.status().message();
    plant_ = std::move(*plant);
  }
  std::unique_ptr<HybridServing> Make(double now = kNow, size_t max_queued = 64) {
    HybridServing::Options o;
    o.lookup_threads = 1;  // FIFO: a write-back finishes before a later lookup starts
    o.max_queued = max_queued;
    o.unix_now = [now] { return now; };
    return std::make_unique<HybridServing>(stores_.get(), std::move(o));
  }
  static HybridServing::Outcome Lookup(HybridServing& h, std::shared_ptr<const ModelSpec> m, const std::string& key,
                                       const std::string& version = "1") {
    std::promise<HybridServing::Outcome> p;
    auto f = p.get_future();
    h.Lookup(std::move(m), version, key, [&p](HybridServing::Outcome o) { p.set_value(std::move(o)); });
    EXPECT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return f.get();
  }
  testing::TempDir dir_;
  std::unique_ptr<jobs::JobStores> stores_;
  std::unique_ptr<jobs::PredictionStore> plant_;
};

TEST_F(HybridServingTest, AFreshRowAnswersOthersAreMissesOrStale) {
  auto h = Make();
  auto m = Model(Pc());
  ASSERT_TRUE(plant_->Write("k1", "m", "1", {jobs::JsonText{"[0.5,-2]"}}).ok());
  ASSERT_TRUE(plant_->Write("old", "m", "0", {jobs::JsonText{"[1,1]"}}).ok());
  ASSERT_TRUE(plant_->Write("bad", "m", "1", {jobs::JsonText{"[1]"}}).ok());

  HybridServing::Outcome hit = Lookup(*h, m, "k1");
  ASSERT_EQ(hit.kind, Kind::kHit) << hit.error.message();
  ASSERT_EQ(hit.outputs.size(), 1u);
  EXPECT_EQ(hit.outputs[0].shape, (Shape{1, 2}));
  float y[2];
  std::memcpy(y, hit.outputs[0].data, sizeof y);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[1], -2.0f);
  EXPECT_EQ(Lookup(*h, m, "nobody").kind, Kind::kMiss);
  EXPECT_EQ(Lookup(*h, m, "old").kind, Kind::kStale);  // written by version 0
  HybridServing::Outcome bad = Lookup(*h, m, "bad");
  EXPECT_EQ(bad.kind, Kind::kError);
  EXPECT_NE(bad.error.message().find("stored output 'y'"), std::string::npos) << bad.error.message();

  PrecomputedSpec young = Pc();
  young.max_age_seconds = 60;  // the planted rows are "now" by the real clock, far before kNow
  EXPECT_EQ(Lookup(*h, Model(young), "k1").kind, Kind::kStale);

  const HybridServing::Counts c = h->CountsOf("m");
  EXPECT_EQ(c.hit, 1u);
  EXPECT_EQ(c.miss, 1u);
  EXPECT_EQ(c.stale, 2u);
  EXPECT_EQ(c.error, 1u);
  PrometheusWriter w;
  h->WriteMetrics(w);
  EXPECT_NE(w.text().find("inferd_precomputed_lookups_total{model=\"m\",result=\"hit\"} 1"), std::string::npos)
      << w.text();
}

TEST_F(HybridServingTest, AnOnlineAnswerIsWrittenBackAndThenServed) {
  auto h = Make(/*now=*/0);  // an injected clock before the rows: never too old
  PrecomputedSpec pc = Pc();
  pc.write_back = true;
  auto m = Model(pc);
  ASSERT_EQ(Lookup(*h, m, "new").kind, Kind::kMiss);
  InferResponse online;
  const float v[2] = {0.25f, 4.0f};
  online.outputs.push_back(Tensor::Own("y", DataType::kFp32, {1, 2},
                                       std::make_shared<std::string>(reinterpret_cast<const char*>(v), sizeof v)));
  h->WriteBack(m, "1", "new", online);
  HybridServing::Outcome hit = Lookup(*h, m, "new");  // one thread: runs after the write
  ASSERT_EQ(hit.kind, Kind::kHit) << hit.error.message();
  float y[2];
  std::memcpy(y, hit.outputs[0].data, sizeof y);
  EXPECT_EQ(y[1], 4.0f);
  EXPECT_EQ(h->CountsOf("m").written, 1u);
  auto stored = plant_->Lookup("new");
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->model_version, "1");
}

TEST_F(HybridServingTest, AFullQueueOrAStoppedServerIsAStoreError) {
  auto full = Make(kNow, /*max_queued=*/0);
  HybridServing::Outcome o = Lookup(*full, Model(Pc()), "k1");
  EXPECT_EQ(o.kind, Kind::kError);
  EXPECT_EQ(o.error.code(), StatusCode::kUnavailable);
  EXPECT_NE(o.error.message().find("too many precomputed lookups"), std::string::npos);
  auto stopped = Make();
  stopped->Shutdown();
  o = Lookup(*stopped, Model(Pc()), "k1");
  EXPECT_EQ(o.kind, Kind::kError);
  EXPECT_NE(o.error.message().find("shutting down"), std::string::npos);
}

TEST_F(HybridServingTest, CheckModelNamesWhatIsWrong) {
  auto h = Make();
  EXPECT_TRUE(h->CheckModel(*Model(Pc())).ok());
  PrecomputedSpec pc = Pc();
  pc.connection = "nope";
  EXPECT_NE(h->CheckModel(*Model(pc)).message().find("'nope' is not a connection"), std::string::npos);
  pc = Pc();
  pc.table = "drop table;";
  EXPECT_FALSE(h->CheckModel(*Model(pc)).ok());
  pc = Pc();
  pc.key_column = "a b";
  EXPECT_FALSE(h->CheckModel(*Model(pc)).ok());
  pc = Pc();
  pc.connection = "other";  // postgres: fine without connecting
  EXPECT_TRUE(h->CheckModel(*Model(pc)).ok());
}

}  // namespace
}  // namespace inferd

#include "tune/tune_space.h"

#include <gtest/gtest.h>

#include <set>

#include "repository/model_config.h"

namespace inferd::tune {
namespace {

ModelSpec TuneSpec(const std::string& text) {
  auto s = ParseModelConfig(text, "m", "test");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : ModelSpec{};
}

constexpr const char* kTuneBatched = R"pb(
  name: "m"
  backend: "onnxruntime"
  max_batch_size: 32 input
  [ {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }]
  dynamic_batching { max_queue_delay_microseconds: 100 } instance_group
  [ { count: 2 kind: KIND_CPU }]
)pb";

TEST(TuneSpaceTest, FactsComeFromTheConfig) {
  ModelFacts f = FactsFromSpec(TuneSpec(kTuneBatched), "onnxruntime", true, 1, "v2-json");
  EXPECT_EQ(f.current.instances, 2);
  EXPECT_EQ(f.current.threads, 1);  // no thread count: the server's default
  EXPECT_EQ(f.current.batching, BatchingMode::kFixed);
  EXPECT_EQ(f.current.delay_us, 100u);
  EXPECT_EQ(f.current.max_batch_size, 32);
  EXPECT_FALSE(f.current.int8);
  EXPECT_EQ(f.threads_key, "INTRA_OP_THREAD_COUNT");
  auto x = TuneSpec(R"pb(name: "m"
                         backend: "xgboost"
                         max_batch_size: 8 input
                         [ {
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 4 ]
                         }]
                         parameters {
                           key: "nthread"
                           value: { string_value: "3" }
                         }
                         parameters {
                           key: "batching.mode"
                           value: { string_value: "adaptive" }
                         }
                         dynamic_batching {})pb");
  f = FactsFromSpec(x, "xgboost", false, 1, "grpc");
  EXPECT_EQ(f.threads_key, "nthread");
  EXPECT_EQ(f.current.threads, 3);
  EXPECT_EQ(f.current.batching, BatchingMode::kAdaptive);
  EXPECT_EQ(f.current.protocol, "grpc");
}

TEST(TuneSpaceTest, TheStartIsTheModelsOwnConfigAndTheSpaceHoldsItsValues) {
  ModelFacts f = FactsFromSpec(TuneSpec(kTuneBatched), "onnxruntime", true, 1, "v2-json");
  TuneSpace space(f, 2, {"v2-json", "v2-binary", "grpc"});
  std::vector<std::string> names;
  for (const auto& d : space.dims()) names.push_back(d.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"protocol", "instances", "threads", "batching", "max_batch_size", "int8"}));
  const Candidate start = space.At(space.start());
  EXPECT_EQ(start.Key(), f.current.Key());
  EXPECT_EQ(start.Key(), "2 instances x 1 thread, batching delay 100 us, max batch 32, fp32, v2-json");
  // The default's odd delay is one of the batching values; instances go to twice the cores.
  EXPECT_EQ(space.dims()[1].values, (std::vector<std::string>{"1", "2", "4"}));
  EXPECT_EQ(space.dims()[3].values, (std::vector<std::string>{"off", "delay 0 us", "delay 500 us", "delay 2000 us",
                                                              "delay 100 us", "adaptive"}));
  EXPECT_EQ(space.dims()[4].values, (std::vector<std::string>{"1", "2", "4", "8", "16", "32"}));
}

TEST(TuneSpaceTest, BoundsTheCoresAndDropsInt8OnceRefused) {
  ModelFacts f = FactsFromSpec(TuneSpec(kTuneBatched), "onnxruntime", true, 1, "v2-json");
  TuneSpace space(f, 2, {"v2-json"});
  Point p = space.start();
  p[1] = 2;  // 4 instances
  p[2] = 1;  // x 2 threads > 2 x 2 cores
  EXPECT_FALSE(space.Allowed(p));
  p[2] = 0;
  EXPECT_TRUE(space.Allowed(p));
  p[5] = 1;  // int8
  EXPECT_TRUE(space.At(p).int8);
  EXPECT_TRUE(space.Allowed(p));
  space.DisallowInt8();
  EXPECT_FALSE(space.Allowed(p));
}

TEST(TuneSpaceTest, OnlyTheDimensionsAskedForAreSearched) {
  ModelFacts f = FactsFromSpec(TuneSpec(kTuneBatched), "onnxruntime", true, 1, "v2-json");
  f.current.int8 = true;
  TuneSpace space(f, 2, {"v2-json", "grpc"}, {"int8", "threads"});
  ASSERT_EQ(space.dims().size(), 2u);
  EXPECT_EQ(space.dims()[0].name, "threads");
  EXPECT_EQ(space.dims()[1].name, "int8");
  Point p = space.start();
  EXPECT_TRUE(space.At(p).int8);
  p[1] = 0;
  const Candidate c = space.At(p);
  EXPECT_FALSE(c.int8);
  EXPECT_EQ(c.instances, 2);  // the rest: the model's own
  EXPECT_EQ(c.protocol, "v2-json");
}

TEST(TuneSpaceTest, UnbatchedModelsAndBackendsWithoutInt8HaveFewerDimensions) {
  auto s = TuneSpec(R"pb(name: "m"
                         platform: "pytorch_libtorch" input
                         [ {
                           name: "x"
                           data_type: TYPE_FP32
                           dims: [ 4 ]
                         }])pb");
  TuneSpace space(FactsFromSpec(s, "pytorch", false, 1, "v2-json"), 4, {"v2-json", "grpc"});
  EXPECT_EQ(space.dims().size(), 3u);  // protocol, instances, threads
}

TEST(TuneSpaceTest, KeysIgnoreWhatDoesNotActAndEditsServeTheCandidate) {
  Candidate a, b;
  a.batching = b.batching = BatchingMode::kOff;
  a.max_batch_size = 4;
  b.max_batch_size = 32;
  EXPECT_EQ(a.ServerKey(), b.ServerKey());
  ModelFacts f = FactsFromSpec(TuneSpec(kTuneBatched), "onnxruntime", true, 1, "v2-json");
  Candidate c = f.current;
  c.instances = 3;
  c.threads = 2;
  c.batching = BatchingMode::kAdaptive;
  c.max_batch_size = 8;
  c.int8 = true;
  ConfigEdit e = EditFor(c, f);
  auto text = EditModelConfig(kTuneBatched, "m", e);
  ASSERT_TRUE(text.ok()) << text.status().message();
  ModelSpec out = TuneSpec(*text);
  ModelFacts back = FactsFromSpec(out, "onnxruntime", true, 1, "v2-json");
  EXPECT_EQ(back.current.ServerKey(), c.ServerKey());
  c.int8 = false;
  c.batching = BatchingMode::kOff;
  text = EditModelConfig(*text, "m", EditFor(c, f));
  ASSERT_TRUE(text.ok());
  out = TuneSpec(*text);
  EXPECT_EQ(out.parameters.count("quantization"), 0u);
  EXPECT_EQ(out.parameters.count("batching.mode"), 0u);
  EXPECT_FALSE(out.batching.dynamic);
}

}  // namespace
}  // namespace inferd::tune

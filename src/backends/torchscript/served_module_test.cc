#include "backends/torchscript/served_module.h"

#include <gtest/gtest.h>

#include <sstream>
#include <thread>

#include "backends/torchscript/optimize.h"

namespace inferd::torchscript {
namespace {

ModelSpec SpecWith(std::map<std::string, std::string> parameters) {
  ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 4;
  TensorSpec x;
  x.name = "x";
  x.dtype = DataType::kFp32;
  x.dims = {4};
  spec.inputs.push_back(x);
  for (auto& [k, v] : parameters) spec.parameters[k] = v;
  return spec;
}

TEST(OptimizePolicy, AutoOptimisesLargeModulesAtLoadAndSmallOnesWhenHot) {
  auto small = OptimizePolicyOf(SpecWith({}), 200 << 10);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->when, OptimizeWhen::kWhenHot);
  EXPECT_EQ(small->after_runs, 1000u);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({}), kOptimizeAtLoadBytes)->when, OptimizeWhen::kAtLoad);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({{"OPTIMIZE_FOR_INFERENCE", "auto"}}), 10)->when, OptimizeWhen::kWhenHot);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({{"OPTIMIZE_FOR_INFERENCE", "true"}}), 10)->when, OptimizeWhen::kAtLoad);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({{"OPTIMIZE_FOR_INFERENCE", "1"}}), 10)->when, OptimizeWhen::kAtLoad);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({{"OPTIMIZE_FOR_INFERENCE", "false"}}), 1 << 30)->when, OptimizeWhen::kNever);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({{"OPTIMIZE_FOR_INFERENCE", "0"}}), 1 << 30)->when, OptimizeWhen::kNever);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({{"OPTIMIZE_AFTER_RUNS", "25"}}), 10)->after_runs, 25u);
  EXPECT_EQ(OptimizePolicyOf(SpecWith({{"OPTIMIZE_AFTER_RUNS", "0"}}), 10)->when, OptimizeWhen::kAtLoad);
}

TEST(OptimizePolicy, ValuesItDoesNotTakeAreRefusedByName) {
  auto bad = OptimizePolicyOf(SpecWith({{"OPTIMIZE_FOR_INFERENCE", "yes"}}), 10);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("OPTIMIZE_FOR_INFERENCE"), std::string::npos);
  for (const char* runs : {"-1", "ten", "", "12x"}) {
    auto r = OptimizePolicyOf(SpecWith({{"OPTIMIZE_AFTER_RUNS", runs}}), 10);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << runs;
    EXPECT_NE(r.status().message().find("OPTIMIZE_AFTER_RUNS"), std::string::npos) << runs;
  }
}

// relu(x W^T + b), saved and loaded back as a file would be.
std::shared_ptr<torch::jit::Module> SmallModule() {
  torch::jit::Module m("small");
  m.register_parameter("w", torch::rand({3, 4}), false);
  m.register_parameter("b", torch::rand({3}), false);
  m.define(R"(
def forward(self, x):
    return torch.relu(torch.linear(x, self.w, self.b))
)");
  std::stringstream archive;
  m.save(archive);
  auto loaded = std::make_shared<torch::jit::Module>(torch::jit::load(archive, torch::kCPU));
  loaded->eval();
  return loaded;
}

TEST(ServedModule, ThePlainModuleServesUntilTheCountThenTheOptimisedOneGivesTheSameAnswers) {
  auto jit_mu = std::make_shared<Mutex>();
  auto plain = SmallModule();
  ServedModule served(jit_mu, plain, 3);
  EXPECT_EQ(&served.serving(), plain.get());
  EXPECT_FALSE(served.CountRun());
  EXPECT_FALSE(served.CountRun());
  EXPECT_TRUE(served.CountRun());   // the third run: optimise now
  EXPECT_FALSE(served.CountRun());  // once only
  EXPECT_EQ(&served.serving(), plain.get());
  const at::Tensor x = torch::rand({2, 4});
  at::Tensor want;
  {
    c10::InferenceMode guard;
    want = plain->forward({x}).toTensor();
  }
  const std::string what = served.Optimize(SpecWith({}), {0}, 1);
  EXPECT_EQ(what.rfind("frozen and optimised for inference after 3 runs in ", 0), 0u) << what;
  EXPECT_TRUE(served.optimized());
  EXPECT_NE(&served.serving(), plain.get());
  c10::InferenceMode guard;
  at::Tensor got = served.serving().forward({x}).toTensor();
  if (got.is_mkldnn()) got = got.to_dense();
  EXPECT_TRUE(at::allclose(want, got, 1e-5, 1e-5));
}

TEST(ServedModule, NoCountWithoutALaterOptimisationAndOneCountAcrossThreads) {
  auto jit_mu = std::make_shared<Mutex>();
  ServedModule never(jit_mu, SmallModule(), 0);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(never.CountRun());
  ServedModule hot(jit_mu, SmallModule(), 1000);
  std::atomic<int> triggered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) triggered += hot.CountRun() ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(triggered.load(), 1);
}

TEST(ServedModule, AModuleThatFailsTheCheckKeepsThePlainOneServing) {
  auto jit_mu = std::make_shared<Mutex>();
  auto plain = SmallModule();
  ServedModule served(jit_mu, plain, 1);
  ModelSpec spec = SpecWith({});
  spec.inputs[0].any_rank = true;  // no shape to make a check input from
  const std::string what = served.Optimize(spec, {0}, 1);
  EXPECT_EQ(what.rfind("not optimised after 1 runs (input 'x' has no known shape", 0), 0u) << what;
  EXPECT_FALSE(served.optimized());
  EXPECT_EQ(&served.serving(), plain.get());
}

}  // namespace
}  // namespace inferd::torchscript

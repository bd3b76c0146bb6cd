#include "repository/config_edit.h"

#include <gtest/gtest.h>

#include "repository/model_config.h"

namespace inferd {
namespace {

constexpr const char* kEditConfig = R"pb(
  name: "m"
  platform: "pytorch_libtorch"
  max_batch_size: 16 input
  [ {
    name: "x"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }] output
  [ {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 2 ]
  }]
  dynamic_batching {
    preferred_batch_size: [ 4, 16 ]
    max_queue_delay_microseconds: 100
  } instance_group
  [ { count: 1 kind: KIND_CPU }
    , { count: 2 kind: KIND_AUTO }]
  parameters {
    key: "INTRA_OP_THREAD_COUNT"
    value: { string_value: "1" }
  }
  parameters {
    key: "OPTIMIZE_FOR_INFERENCE"
    value: { string_value: "true" }
  }
)pb";

ModelSpec ParseEdited(const std::string& text) {
  auto spec = ParseModelConfig(text, "m", "test");
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? *spec : ModelSpec{};
}

TEST(ConfigEditTest, AppliesTheSettingsAndKeepsTheRest) {
  ConfigEdit e;
  e.instance_count = 3;
  e.max_batch_size = 8;
  e.batching = ConfigEdit::Batching::kOn;
  e.max_queue_delay_us = 2000;
  e.parameters["INTRA_OP_THREAD_COUNT"] = "2";
  e.parameters["batching.mode"] = "adaptive";
  e.header = "written by inferd tune\n\nobjective p99 <= 5 ms";
  auto text = EditModelConfig(kEditConfig, "m", e);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(text->rfind("# written by inferd tune\n#\n# objective p99 <= 5 ms\n", 0), 0u) << *text;
  ModelSpec s = ParseEdited(*text);
  EXPECT_EQ(s.instance_count, 3);
  EXPECT_EQ(s.max_batch_size, 8);
  EXPECT_TRUE(s.batching.dynamic);
  EXPECT_EQ(s.batching.max_queue_delay_us, 2000u);
  EXPECT_EQ(s.batching.preferred_batch_sizes, std::vector<int>{4});  // 16 > the new max dropped
  EXPECT_EQ(s.parameters.at("INTRA_OP_THREAD_COUNT"), "2");
  EXPECT_EQ(s.parameters.at("batching.mode"), "adaptive");
  EXPECT_EQ(s.parameters.at("OPTIMIZE_FOR_INFERENCE"), "true");  // untouched
  ASSERT_EQ(s.inputs.size(), 1u);
  EXPECT_EQ(s.inputs[0].name, "x");
  EXPECT_EQ(s.platform, "pytorch_libtorch");
}

TEST(ConfigEditTest, TurnsBatchingOffAndRemovesParameters) {
  ConfigEdit e;
  e.batching = ConfigEdit::Batching::kOff;
  e.parameters["OPTIMIZE_FOR_INFERENCE"] = std::nullopt;
  auto text = EditModelConfig(kEditConfig, "m", e);
  ASSERT_TRUE(text.ok()) << text.status().message();
  ModelSpec s = ParseEdited(*text);
  EXPECT_FALSE(s.batching.dynamic);
  EXPECT_EQ(s.parameters.count("OPTIMIZE_FOR_INFERENCE"), 0u);
  EXPECT_EQ(s.instance_count, 3);  // both groups kept when the count is not edited
}

TEST(ConfigEditTest, RefusesWhatTheServerWouldRefuse) {
  ConfigEdit e;
  e.instance_count = 0;
  EXPECT_FALSE(EditModelConfig(kEditConfig, "m", e).ok());
  EXPECT_FALSE(EditModelConfig("name: ", "m", ConfigEdit{}).ok());
  EXPECT_FALSE(EditModelConfig(kEditConfig, "other", ConfigEdit{}).ok());  // the name must match the folder
}

}  // namespace
}  // namespace inferd

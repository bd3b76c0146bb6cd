#include "core/compare_spec.h"

#include <gtest/gtest.h>

#include "core/model_spec.h"

namespace inferd {
namespace {

ModelSpec TwoOutputs() {
  ModelSpec m;
  m.name = "m";
  m.outputs.push_back(TensorSpec{"probs", DataType::kFp32, {3}});
  m.outputs.push_back(TensorSpec{"score", DataType::kFp32, {2}});
  m.outputs[0].label_filename = "labels.txt";
  return m;
}

TEST(CompareSpec, LabelFilesAndTheParameterNameClassifiers) {
  const ModelSpec m = TwoOutputs();
  auto c = ParseCompareSpec({}, m);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->classifier_outputs, (std::set<std::string>{"probs"}));
  EXPECT_DOUBLE_EQ(c->tolerance, 1e-4);
  c = ParseCompareSpec({{"compare.classifier_outputs", " score, probs "}, {"compare.tolerance", "0.5"}}, m);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->classifier_outputs, (std::set<std::string>{"probs", "score"}));
  EXPECT_DOUBLE_EQ(c->tolerance, 0.5);
  EXPECT_TRUE(ParseCompareSpec({{"compare.tolerance", "0"}}, m).ok());
}

TEST(CompareSpec, BadParametersAreRefusedByName) {
  const ModelSpec m = TwoOutputs();
  for (const auto& [key, value, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"compare.classifier_outputs", "nope", "'nope' is not an output"},
           {"compare.tolerance", "abc", "not a number"},
           {"compare.tolerance", "-1", ">= 0"},
           {"compare.tolerance", "inf", "finite"},
           {"compare.tolerence", "1", "unknown"}}) {
    auto c = ParseCompareSpec({{key, value}}, m);
    ASSERT_FALSE(c.ok()) << key << "=" << value;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find("parameters." + key), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
  }
}

}  // namespace
}  // namespace inferd

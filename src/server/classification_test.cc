#include "server/classification.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace inferd {
namespace {

Tensor Floats(std::string name, Shape shape, const std::vector<float>& v) {
  return Tensor::Copy(std::move(name), DataType::kFp32, std::move(shape),
                      std::as_bytes(std::span<const float>(v.data(), v.size())));
}

std::vector<std::string> Elements(const Tensor& t) {
  EXPECT_EQ(t.dtype, DataType::kBytes);
  auto split = SplitBytesElements(t.bytes());
  EXPECT_TRUE(split.ok());
  return std::vector<std::string>(split->begin(), split->end());
}

TEST(Classification, TopKPerRowAsValueIndexAndLabelHighestFirst) {
  const std::vector<std::string> labels = {"cat", "dog", "bird", "fish"};
  Tensor t = Floats("probs", {2, 4}, {0.1f, 0.6f, 0.05f, 0.25f, 0.7f, 0.1f, 0.15f, 0.05f});
  auto top = Classify(t, 3, /*batched=*/true, &labels);
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(top->name, "probs");
  EXPECT_EQ(top->shape, (Shape{2, 3}));
  EXPECT_EQ(Elements(*top), (std::vector<std::string>{"0.600000:1:dog", "0.250000:3:fish", "0.100000:0:cat",
                                                      "0.700000:0:cat", "0.150000:2:bird", "0.100000:1:dog"}));
  auto one = Classify(t, 1, /*batched=*/true, nullptr);  // no label file
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->shape, (Shape{2, 1}));
  EXPECT_EQ(Elements(*one), (std::vector<std::string>{"0.600000:1", "0.700000:0"}));
}

TEST(Classification, WithoutABatchDimensionTheWholeTensorIsOneRow) {
  Tensor t = Floats("logits", {1, 3}, {-2.0f, 5.5f, 1.0f});
  auto top = Classify(t, 2, /*batched=*/false, nullptr);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->shape, (Shape{2}));
  EXPECT_EQ(Elements(*top), (std::vector<std::string>{"5.500000:1", "1.000000:2"}));
}

TEST(Classification, TiesKeepTheLowerIndexNaNComesLastAndLabelsMayRunShort) {
  const std::vector<std::string> labels = {"a"};
  Tensor t = Floats("p", {1, 4}, {std::nanf(""), 0.5f, 0.5f, 0.25f});
  auto top = Classify(t, 4, true, &labels);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(Elements(*top), (std::vector<std::string>{"0.500000:1", "0.500000:2", "0.250000:3", "nan:0:a"}));
}

TEST(Classification, IntegerAndDoubleOutputsPrintAsFloats) {
  std::vector<int64_t> v = {3, 9, -1};
  Tensor t = Tensor::Copy("counts", DataType::kInt64, {3}, std::as_bytes(std::span<const int64_t>(v)));
  auto top = Classify(t, 2, false, nullptr);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(Elements(*top), (std::vector<std::string>{"9.000000:1", "3.000000:0"}));
}

TEST(Classification, MoreClassesThanTheOutputHasOrANonNumericOutputIsAnError) {
  Tensor t = Floats("probs", {2, 4}, std::vector<float>(8, 0.25f));
  auto top = Classify(t, 5, true, nullptr);
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(top.status().message(), "output 'probs' has 4 classes; classification asks for 5");

  std::string raw;
  AppendBytesElement(&raw, std::string_view("x"));
  Tensor s = Tensor::Own("s", DataType::kBytes, {1}, std::make_shared<const std::string>(raw));
  EXPECT_NE(Classify(s, 1, false, nullptr).status().message().find("needs a numeric output"), std::string::npos);

  // Checked before the model runs where the config says enough.
  ModelSpec spec;
  spec.max_batch_size = 8;
  spec.outputs.push_back({"probs", DataType::kFp32, {4}});
  spec.outputs.push_back({"name", DataType::kBytes, {1}});
  EXPECT_TRUE(CheckClassification(spec, {{"probs", false, false, 4}}).ok());
  EXPECT_EQ(CheckClassification(spec, {{"probs", false, false, 5}}).message(),
            "output 'probs' has 4 classes; classification asks for 5");
  EXPECT_NE(CheckClassification(spec, {{"name", false, false, 1}}).message().find("BYTES"), std::string::npos);
}

TEST(Classification, ThePlanCarriesLabelsAndReplacesOnlyTheNamedOutputs) {
  ModelSpec spec;
  spec.max_batch_size = 4;
  TensorSpec probs{"probs", DataType::kFp32, {2}};
  probs.labels = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"no", "yes"});
  spec.outputs = {probs, {"raw", DataType::kFp32, {2}}};
  Classification plan = PlanClassification(spec, {{"probs", false, false, 1}, {"raw", false, false, 0}});
  ASSERT_EQ(plan.outputs.size(), 1u);
  EXPECT_TRUE(plan.batched);
  InferResponse r;
  r.outputs = {Floats("probs", {1, 2}, {0.2f, 0.8f}), Floats("raw", {1, 2}, {0.2f, 0.8f})};
  ASSERT_TRUE(ApplyClassification(plan, &r).ok());
  EXPECT_EQ(Elements(r.outputs[0]), (std::vector<std::string>{"0.800000:1:yes"}));
  EXPECT_EQ(r.outputs[1].dtype, DataType::kFp32);
}

}  // namespace
}  // namespace inferd

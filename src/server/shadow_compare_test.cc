#include "server/shadow_compare.h"

#include <gtest/gtest.h>

#include <cmath>

namespace inferd {
namespace {

InferResponse Answer(std::vector<float> v, Shape shape, std::string name = "y") {
  InferResponse r;
  r.outputs.push_back(Tensor::Copy(name, DataType::kFp32, std::move(shape), std::as_bytes(std::span<const float>(v))));
  return r;
}

TEST(ShadowCompare, ClassifiersAgreeOnTopOneDespiteSmallDifferences) {
  CompareSpec classifier;
  classifier.classifier_outputs = {"y"};
  auto a = Answer({0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f}, {2, 3});
  auto b = Answer({0.15f, 0.6f, 0.25f, 0.45f, 0.35f, 0.2f}, {2, 3});
  ShadowVerdict v = CompareAnswers(a, b, classifier);
  EXPECT_TRUE(v.agreed) << v.why;
  EXPECT_NEAR(v.max_abs_diff, 0.1, 1e-6);
  auto c = Answer({0.1f, 0.7f, 0.2f, 0.3f, 0.5f, 0.2f}, {2, 3});  // row 1's top-1 moved
  v = CompareAnswers(a, c, classifier);
  EXPECT_FALSE(v.agreed);
  EXPECT_NE(v.why.find("row 1"), std::string::npos) << v.why;
  // Without the config saying so the same [batch, 3] output is numeric: the small differences disagree.
  EXPECT_FALSE(CompareAnswers(a, b).agreed);
}

// The shape never makes an output a classifier: a regression model with
// several values per row whose answers all move by +100 keeps its top-1 but
// disagrees (it was promoted as a canary once); within the tolerance it agrees.
TEST(ShadowCompare, MultiValueRegressionOutputsOffByAConstantDisagree) {
  auto a = Answer({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3});
  auto shifted = Answer({101.0f, 102.0f, 103.0f, 104.0f, 105.0f, 106.0f}, {2, 3});
  ShadowVerdict v = CompareAnswers(a, shifted);
  EXPECT_FALSE(v.agreed);
  EXPECT_NEAR(v.max_abs_diff, 100, 1e-4);
  CompareSpec loose;
  loose.tolerance = 0.01;
  EXPECT_TRUE(CompareAnswers(a, Answer({1.01f, 2.0f, 3.0f, 4.0f, 5.0f, 6.05f}, {2, 3}), loose).agreed);
  EXPECT_FALSE(CompareAnswers(a, Answer({1.1f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, {2, 3}), loose).agreed);
}

TEST(ShadowCompare, RegressionOutputsNeedToBeWithinTolerance) {
  auto a = Answer({1.0f, 100.0f}, {2, 1});
  EXPECT_TRUE(CompareAnswers(a, Answer({1.00001f, 100.001f}, {2, 1})).agreed);
  ShadowVerdict v = CompareAnswers(a, Answer({1.5f, 100.0f}, {2, 1}));
  EXPECT_FALSE(v.agreed);
  EXPECT_NEAR(v.max_abs_diff, 0.5, 1e-6);
}

TEST(ShadowCompare, MissingOutputsShapesAndBytesDisagree) {
  auto a = Answer({1, 2}, {2});
  EXPECT_FALSE(CompareAnswers(a, Answer({1, 2}, {2}, "z")).agreed);
  EXPECT_FALSE(CompareAnswers(a, Answer({1, 2}, {1, 2})).agreed);
  auto nan = Answer({1, NAN}, {2});
  EXPECT_FALSE(CompareAnswers(a, nan).agreed);
  InferResponse s1, s2;
  std::string b1, b2;
  AppendBytesElement(&b1, std::string_view("cat"));
  AppendBytesElement(&b2, std::string_view("dog"));
  s1.outputs.push_back(Tensor::Copy("l", DataType::kBytes, {1}, std::as_bytes(std::span(b1.data(), b1.size()))));
  s2.outputs.push_back(Tensor::Copy("l", DataType::kBytes, {1}, std::as_bytes(std::span(b2.data(), b2.size()))));
  EXPECT_FALSE(CompareAnswers(s1, s2).agreed);
  EXPECT_TRUE(CompareAnswers(s1, s1).agreed);
  // Extra outputs in the shadow's answer are fine.
  InferResponse more = a;
  more.outputs.push_back(Tensor::Copy("extra", DataType::kFp32, {0}, {}));
  EXPECT_TRUE(CompareAnswers(a, more).agreed);
}

}  // namespace
}  // namespace inferd

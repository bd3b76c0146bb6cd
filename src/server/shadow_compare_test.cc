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
  auto a = Answer({0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f}, {2, 3});
  auto b = Answer({0.15f, 0.6f, 0.25f, 0.45f, 0.35f, 0.2f}, {2, 3});
  ShadowVerdict v = CompareAnswers(a, b);
  EXPECT_TRUE(v.agreed) << v.why;
  EXPECT_NEAR(v.max_abs_diff, 0.1, 1e-6);
  auto c = Answer({0.1f, 0.7f, 0.2f, 0.3f, 0.5f, 0.2f}, {2, 3});  // row 1's top-1 moved
  v = CompareAnswers(a, c);
  EXPECT_FALSE(v.agreed);
  EXPECT_NE(v.why.find("row 1"), std::string::npos) << v.why;
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

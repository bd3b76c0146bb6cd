#include "features/feature_vector.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd::features {
namespace {

FeatureSpec Spec() {
  FeatureSpec f;
  f.connection = "online";
  f.key_parameter = "user_id";
  f.key_prefix = "user:";
  f.input = "x";
  f.names = {"age", "visits", "spend"};
  f.defaults = {std::nullopt, 0.0, std::nullopt};
  return f;
}

TensorSpec Input(DataType dt = DataType::kFp32) { return TensorSpec{"x", dt, {3}}; }

TEST(AssembleFeatures, ValuesInOrderWithDefaults) {
  auto a = AssembleFeatures(Spec(), Input(), /*batched=*/true, "u1", {"31", std::nullopt, "12.5"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->defaulted, 1u);
  EXPECT_EQ(a->tensor.name, "x");
  EXPECT_EQ(a->tensor.shape, (Shape{1, 3}));
  float v[3];
  ASSERT_EQ(a->tensor.byte_size, sizeof v);
  std::memcpy(v, a->tensor.data, sizeof v);
  EXPECT_EQ(v[0], 31.0f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 12.5f);
  auto unbatched = AssembleFeatures(Spec(), Input(DataType::kInt64), false, "u1", {"31", "2", "12"});
  ASSERT_TRUE(unbatched.ok());
  EXPECT_EQ(unbatched->tensor.shape, (Shape{3}));
  int64_t i[3];
  std::memcpy(i, unbatched->tensor.data, sizeof i);
  EXPECT_EQ(i[2], 12);
}

TEST(AssembleFeatures, MissingFeaturesWithoutDefaultsAreNotFound) {
  auto one = AssembleFeatures(Spec(), Input(), true, "u1", {"31", "2", std::nullopt});
  EXPECT_EQ(one.status().code(), StatusCode::kNotFound);
  EXPECT_NE(one.status().message().find("entity 'u1' lacks feature spend in Redis (key 'user:u1')"), std::string::npos)
      << one.status().message();
  auto none = AssembleFeatures(Spec(), Input(), true, "ghost", {std::nullopt, std::nullopt, std::nullopt});
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("entity 'ghost' lacks features age, spend"), std::string::npos)
      << none.status().message();
  FeatureSpec all = Spec();
  all.defaults = {1.0, 2.0, 3.0};  // every feature has a default: an unknown entity gets them all
  auto defaulted = AssembleFeatures(all, Input(), true, "ghost", {std::nullopt, std::nullopt, std::nullopt});
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->defaulted, 3u);
}

TEST(AssembleFeatures, BadDataInRedisIsAnInternalError) {
  for (const redis::FieldValues& bad :
       std::vector<redis::FieldValues>{{"31", "x", "1"}, {"31", "1e999", "1"}, {"", "1", "1"}}) {
    auto a = AssembleFeatures(Spec(), Input(), true, "u1", bad);
    EXPECT_EQ(a.status().code(), StatusCode::kInternal);
  }
  auto range = AssembleFeatures(Spec(), Input(DataType::kInt8), true, "u1", {"300", "1", "1"});
  EXPECT_EQ(range.status().code(), StatusCode::kInternal);
  EXPECT_NE(range.status().message().find("does not fit input 'x' (INT8)"), std::string::npos);
  auto fraction = AssembleFeatures(Spec(), Input(DataType::kInt32), true, "u1", {"1.5", "1", "1"});
  EXPECT_EQ(fraction.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace inferd::features

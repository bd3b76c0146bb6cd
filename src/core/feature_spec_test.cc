#include "core/feature_spec.h"

#include <gtest/gtest.h>

#include "core/model_spec.h"

namespace inferd {
namespace {

ModelSpec FeatureModel() {
  ModelSpec m;
  m.name = "m";
  m.max_batch_size = 8;
  m.inputs.push_back(TensorSpec{"x", DataType::kFp32, {3}});
  m.inputs.push_back(TensorSpec{"text", DataType::kBytes, {1}});
  m.inputs.push_back(TensorSpec{"var", DataType::kFp32, {-1}});
  return m;
}

std::map<std::string, std::string> Base() {
  return {{"features.connection", "online"},
          {"features.key_parameter", "user_id"},
          {"features.input", "x"},
          {"features.names", "age, visits ,spend"}};
}

TEST(FeatureSpec, AbsentWithoutParametersAndReadOtherwise) {
  auto none = ParseFeatureSpec({{"precomputed.table", "t"}}, FeatureModel());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto p = Base();
  p["features.key_prefix"] = "user:";
  p["features.defaults"] = "0,,1.5";
  auto f = ParseFeatureSpec(p, FeatureModel());
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ((*f)->names, (std::vector<std::string>{"age", "visits", "spend"}));
  EXPECT_EQ((*f)->key_prefix, "user:");
  ASSERT_EQ((*f)->defaults.size(), 3u);
  EXPECT_EQ((*f)->defaults[0], std::optional<double>(0));
  EXPECT_FALSE((*f)->defaults[1].has_value());
  EXPECT_EQ((*f)->defaults[2], std::optional<double>(1.5));
  p["features.defaults"] = "-1";  // one value for all
  f = ParseFeatureSpec(p, FeatureModel());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->defaults, (std::vector<std::optional<double>>{-1.0, -1.0, -1.0}));
  f = ParseFeatureSpec(Base(), FeatureModel());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->defaults, (std::vector<std::optional<double>>(3)));
}

TEST(FeatureSpec, RefusesWhatIsMissingUnknownOrMalformed) {
  auto with = [](std::string k, std::string v) {
    auto m = Base();
    if (v == "<erase>")
      m.erase(k);
    else
      m[std::move(k)] = std::move(v);
    return m;
  };
  const struct {
    std::map<std::string, std::string> params;
    std::string field;
  } cases[] = {
      {with("features.connection", "<erase>"), "features.connection"},
      {with("features.key_parameter", "<erase>"), "features.key_parameter"},
      {with("features.input", "<erase>"), "features.input"},
      {with("features.names", "<erase>"), "features.names"},
      {with("features.colour", "red"), "features.colour"},
      {with("features.input", "nope"), "features.input"},
      {with("features.input", "text"), "features.input"},  // BYTES
      {with("features.input", "var"), "features.input"},   // variable dims
      {with("features.names", "a,b"), "features.names"},   // 3 elements
      {with("features.names", "a,,b"), "features.names"},
      {with("features.names", "a,b,a"), "features.names"},
      {with("features.defaults", "1,2"), "features.defaults"},
      {with("features.defaults", "1,x,2"), "features.defaults"},
      {with("features.defaults", "inf"), "features.defaults"},
  };
  for (const auto& c : cases) {
    auto f = ParseFeatureSpec(c.params, FeatureModel());
    ASSERT_FALSE(f.ok()) << c.field;
    EXPECT_NE(f.status().message().find("'parameters." + c.field + "'"), std::string::npos) << f.status().message();
  }
}

}  // namespace
}  // namespace inferd

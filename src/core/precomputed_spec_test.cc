#include "core/precomputed_spec.h"

#include <gtest/gtest.h>

#include "core/model_spec.h"

namespace inferd {
namespace {

ModelSpec Model() {
  ModelSpec m;
  m.name = "m";
  m.max_batch_size = 8;
  m.inputs.push_back(TensorSpec{"x", DataType::kFp32, {4}});
  m.inputs.push_back(TensorSpec{"user", DataType::kBytes, {1}});
  m.outputs.push_back(TensorSpec{"y", DataType::kFp32, {3}});
  auto rule = ParseOutputRule("label", "y | argmax");
  EXPECT_TRUE(rule.ok());
  m.rules.push_back(*rule);
  return m;
}

TEST(PrecomputedSpec, AbsentWithoutParametersAndDefaultsOtherwise) {
  auto none = ParsePrecomputedSpec({{"rule:label", "y | argmax"}}, Model());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto p = ParsePrecomputedSpec({{"precomputed.connection", "db"}, {"precomputed.table", "preds"}}, Model());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->has_value());
  EXPECT_EQ((*p)->key_parameter, "key");
  EXPECT_EQ((*p)->key_column, "key");
  EXPECT_EQ((*p)->outputs, (std::vector<std::string>{"y", "label"}));
  EXPECT_EQ((*p)->max_age_seconds, 0);
  EXPECT_FALSE((*p)->any_version);
  EXPECT_FALSE((*p)->write_back);
  EXPECT_FALSE((*p)->fail_on_store_error);
}

TEST(PrecomputedSpec, ReadsEverySetting) {
  auto p = ParsePrecomputedSpec({{"precomputed.connection", "db"},
                                 {"precomputed.table", "preds"},
                                 {"precomputed.key_input", "user"},
                                 {"precomputed.outputs", " label , y"},
                                 {"precomputed.max_age_seconds", "3600"},
                                 {"precomputed.version", "any"},
                                 {"precomputed.write_back", "true"},
                                 {"precomputed.on_store_error", "fail"}},
                                Model());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)->key_input, "user");
  EXPECT_EQ((*p)->key_column, "user");
  EXPECT_EQ((*p)->outputs, (std::vector<std::string>{"label", "y"}));
  EXPECT_EQ((*p)->max_age_seconds, 3600);
  EXPECT_TRUE((*p)->any_version);
  EXPECT_TRUE((*p)->write_back);
  EXPECT_TRUE((*p)->fail_on_store_error);
  auto named = ParsePrecomputedSpec(
      {{"precomputed.connection", "db"}, {"precomputed.table", "t"}, {"precomputed.key_parameter", "id"}}, Model());
  ASSERT_TRUE(named.ok());
  EXPECT_EQ((*named)->key_column, "id");
}

TEST(PrecomputedSpec, RefusesWhatIsMissingUnknownOrMalformed) {
  const std::map<std::string, std::string> base = {{"precomputed.connection", "db"}, {"precomputed.table", "t"}};
  auto with = [&](std::string k, std::string v) {
    auto m = base;
    m[std::move(k)] = std::move(v);
    return m;
  };
  const struct {
    std::map<std::string, std::string> params;
    std::string field;
  } cases[] = {
      {{{"precomputed.table", "t"}}, "precomputed.connection"},
      {{{"precomputed.connection", "db"}}, "precomputed.table"},
      {with("precomputed.colour", "red"), "precomputed.colour"},
      {with("precomputed.max_age_seconds", "-1"), "precomputed.max_age_seconds"},
      {with("precomputed.max_age_seconds", "1h"), "precomputed.max_age_seconds"},
      {with("precomputed.version", "latest"), "precomputed.version"},
      {with("precomputed.write_back", "yes"), "precomputed.write_back"},
      {with("precomputed.on_store_error", "retry"), "precomputed.on_store_error"},
      {with("precomputed.outputs", "y,z"), "precomputed.outputs"},
      {with("precomputed.outputs", "y,,label"), "precomputed.outputs"},
      {with("precomputed.outputs", "y,y"), "precomputed.outputs"},
      {with("precomputed.key_input", "nope"), "precomputed.key_input"},
      {with("precomputed.key_input", "x"), "precomputed.key_input"},  // FP32, four elements
  };
  for (const auto& c : cases) {
    auto p = ParsePrecomputedSpec(c.params, Model());
    ASSERT_FALSE(p.ok()) << c.field;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("'parameters." + c.field + "'"), std::string::npos) << p.status().message();
  }
  ModelSpec undeclared = Model();
  undeclared.outputs.clear();
  undeclared.rules.clear();
  EXPECT_FALSE(ParsePrecomputedSpec(base, undeclared).ok());
}

}  // namespace
}  // namespace inferd

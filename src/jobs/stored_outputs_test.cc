#include "jobs/stored_outputs.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd::jobs {
namespace {

ModelSpec Model(int max_batch_size) {
  ModelSpec m;
  m.name = "m";
  m.max_batch_size = max_batch_size;
  m.outputs.push_back(TensorSpec{"y", DataType::kFp32, {3}});
  m.outputs.push_back(TensorSpec{"n", DataType::kInt64, {1}});
  auto rule = ParseOutputRule("label", "y | argmax");
  EXPECT_TRUE(rule.ok());
  m.rules.push_back(*rule);
  return m;
}

std::vector<float> Floats(const Tensor& t) {
  std::vector<float> v(t.byte_size / sizeof(float));
  std::memcpy(v.data(), t.data, t.byte_size);
  return v;
}

TEST(StoredOutputs, CellsBecomeTensorsWithTheOutputsTypesAndShapes) {
  auto so = StoredOutputs::Make(Model(4), {"y", "n"});
  ASSERT_TRUE(so.ok()) << so.status().message();
  auto t = so->ToTensors({std::string("[0.25, -1.5, 3]"), int64_t{7}});
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].name, "y");
  EXPECT_EQ((*t)[0].dtype, DataType::kFp32);
  EXPECT_EQ((*t)[0].shape, (Shape{1, 3}));  // the batch dimension of one row
  EXPECT_EQ(Floats((*t)[0]), (std::vector<float>{0.25f, -1.5f, 3.0f}));
  EXPECT_EQ((*t)[1].dtype, DataType::kInt64);
  int64_t n = 0;
  std::memcpy(&n, (*t)[1].data, sizeof n);
  EXPECT_EQ(n, 7);
  auto unbatched = StoredOutputs::Make(Model(0), {"y"});
  ASSERT_TRUE(unbatched.ok());
  auto u = unbatched->ToTensors({JsonText{"[1,2,3]"}});
  ASSERT_TRUE(u.ok());
  EXPECT_EQ((*u)[0].shape, (Shape{3}));
}

TEST(StoredOutputs, AnAnswerRoundTripsThroughCells) {
  auto so = StoredOutputs::Make(Model(4), {"y", "n"});
  ASSERT_TRUE(so.ok());
  auto t = so->ToTensors({NumberArray{{0.1f, 0.2f, 0.7f}}, int64_t{-3}});
  ASSERT_TRUE(t.ok());
  InferResponse r;
  r.outputs = *t;
  auto cells = so->ToCells(r);
  ASSERT_TRUE(cells.ok()) << cells.status().message();
  ASSERT_EQ(cells->size(), 2u);
  auto again = so->ToTensors(*cells);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Floats((*again)[0]), Floats((*t)[0]));  // shortest text of each float reads back exactly
  EXPECT_EQ(CellText((*cells)[1]), "-3");
  InferResponse missing;
  missing.outputs.push_back((*t)[0]);
  EXPECT_FALSE(so->ToCells(missing).ok());
}

TEST(StoredOutputs, RuleOutputsTakeTheRulesType) {
  auto so = StoredOutputs::Make(Model(4), {"label"});
  ASSERT_TRUE(so.ok()) << so.status().message();
  auto t = so->ToTensors({int64_t{2}});
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ((*t)[0].dtype, Model(4).rules[0].dtype());
}

TEST(StoredOutputs, RowsThatDoNotFitAreErrorsNamingTheOutput) {
  auto so = StoredOutputs::Make(Model(4), {"y", "n"});
  ASSERT_TRUE(so.ok());
  const std::vector<std::vector<Cell>> bad = {
      {std::string("[1,2]"), int64_t{1}},          // two elements for three
      {std::string("[1,2,3]"), std::monostate{}},  // NULL
      {std::string("[1,2,"), int64_t{1}},          // malformed JSON
      {std::string("[1,2,3]"), std::string("x")},  // not a number
      {std::string("[1,2,3]")},                    // a value short
  };
  for (const auto& cells : bad) {
    auto t = so->ToTensors(cells);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_NE(so->ToTensors({std::string("[1,2]"), int64_t{1}}).status().message().find("stored output 'y'"),
            std::string::npos);
  EXPECT_FALSE(StoredOutputs::Make(Model(4), {"z"}).ok());
}

}  // namespace
}  // namespace inferd::jobs

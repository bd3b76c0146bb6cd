#include "jobs/row_encoder.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd::jobs {
namespace {

ModelSpec Model(DataType dt, Shape dims, int max_batch = 8) {
  ModelSpec m;
  m.name = "m";
  m.max_batch_size = max_batch;
  m.inputs.push_back(TensorSpec{"x", dt, dims});
  m.outputs.push_back(TensorSpec{"y", DataType::kFp32, {2}});
  m.outputs.push_back(TensorSpec{"label", DataType::kBytes, {1}});
  return m;
}

JobSpec Spec(std::vector<std::string> columns, std::vector<std::string> outputs = {}) {
  JobSpec s;
  s.model = "m";
  s.key = "id";
  s.inputs.push_back(InputMapping{"x", std::move(columns)});
  s.outputs = std::move(outputs);
  return s;
}

Row MakeRow(std::vector<Cell> cells) {
  Row r;
  r.cells = std::move(cells);
  return r;
}

TEST(RowEncoder, ColumnsAndJsonArraysFillOneTensor) {
  auto enc = RowEncoder::Make(Spec({"a", "rest"}), Model(DataType::kFp32, {2, 2}), {"id", "a", "rest"});
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  EXPECT_EQ(enc->rows_per_request(), 8);
  auto b = enc->NewBatch();
  ASSERT_TRUE(enc->Append(MakeRow({std::string("k1"), std::string(" 1.5 "), std::string("[[2, 3], [4]]")}), &b).ok());
  ASSERT_TRUE(enc->Append(MakeRow({std::string("k2"), int64_t{5}, NumberArray{{6, 7, 8}}}), &b).ok());
  // Wrong element count and a non-number leave the batch as it was.
  Status few = enc->Append(MakeRow({std::string("k3"), 1.0, JsonText{"[1]"}}), &b);
  EXPECT_NE(few.message().find("needs 4 elements (dims [2,2]), the row gives 2"), std::string::npos) << few.message();
  Status nan = enc->Append(MakeRow({std::string("k4"), std::string("abc"), JsonText{"[1, 2, 3]"}}), &b);
  EXPECT_NE(nan.message().find("column 'a' value 'abc' is not a number"), std::string::npos) << nan.message();
  Status null = enc->Append(MakeRow({std::string("k5"), std::monostate{}, JsonText{"[1, 2, 3]"}}), &b);
  EXPECT_NE(null.message().find("column 'a' is empty"), std::string::npos) << null.message();
  auto req = enc->ToRequest(std::move(b), "m", "");
  EXPECT_TRUE(req->background);
  ASSERT_EQ(req->inputs.size(), 1u);
  EXPECT_EQ(req->inputs[0].shape, (Shape{2, 2, 2}));
  const float* v = req->inputs[0].as<float>();
  EXPECT_EQ(std::vector<float>(v, v + 8), (std::vector<float>{1.5f, 2, 3, 4, 5, 6, 7, 8}));
}

// At submit the mapping is judged on the source's first row: too few or too
// many elements for a fixed-size input refuse the job; a value that does not
// parse does not (that row is a row error when the job runs).
TEST(RowEncoder, CheckMappingRefusesColumnsThatCannotFillTheInput) {
  auto enc = RowEncoder::Make(Spec({"a", "b", "c"}), Model(DataType::kFp32, {8}), {"id", "a", "b", "c"});
  ASSERT_TRUE(enc.ok()) << enc.status().message();
  Status few = enc->CheckMapping(MakeRow({std::string("k"), 1.0, 2.0, 3.0}));
  EXPECT_EQ(few.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(few.message().find("input 'x' (a, b, c) give 3 elements"), std::string::npos) << few.message();
  EXPECT_NE(few.message().find("need 8"), std::string::npos) << few.message();
  // JSON arrays that make up the count fill it.
  EXPECT_TRUE(
      enc->CheckMapping(MakeRow({std::string("k"), 1.0, JsonText{"[2, 3, 4]"}, NumberArray{{5, 6, 7, 8}}})).ok());
  // A value that does not parse is a row error later, not a mapping error.
  EXPECT_TRUE(enc->CheckMapping(MakeRow({std::string("k"), std::string("abc"), 2.0, 3.0})).ok());
  // A variable dimension takes any count.
  auto var = RowEncoder::Make(Spec({"a"}), Model(DataType::kFp32, {-1}), {"id", "a"});
  ASSERT_TRUE(var.ok());
  EXPECT_TRUE(var->CheckMapping(MakeRow({std::string("k"), 1.0})).ok());
}

TEST(RowEncoder, IntegerTypesCheckRangeAndIntegrality) {
  auto enc = RowEncoder::Make(Spec({"a"}), Model(DataType::kInt8, {1}), {"id", "a"});
  ASSERT_TRUE(enc.ok());
  auto b = enc->NewBatch();
  EXPECT_TRUE(enc->Append(MakeRow({std::string("k"), std::string("-128")}), &b).ok());
  EXPECT_TRUE(enc->Append(MakeRow({std::string("k"), 7.0}), &b).ok());
  EXPECT_FALSE(enc->Append(MakeRow({std::string("k"), std::string("128")}), &b).ok());
  EXPECT_FALSE(enc->Append(MakeRow({std::string("k"), 1.5}), &b).ok());
  auto req = enc->ToRequest(std::move(b), "m", "");
  const int8_t* v = req->inputs[0].as<int8_t>();
  EXPECT_EQ(v[0], -128);
  EXPECT_EQ(v[1], 7);
}

TEST(RowEncoder, BytesInputsTakeTextAsIs) {
  auto enc = RowEncoder::Make(Spec({"a", "b"}), Model(DataType::kBytes, {2}), {"id", "a", "b"});
  ASSERT_TRUE(enc.ok());
  auto b = enc->NewBatch();
  ASSERT_TRUE(enc->Append(MakeRow({std::string("k"), std::string("hello, world"), int64_t{42}}), &b).ok());
  auto req = enc->ToRequest(std::move(b), "m", "");
  auto elems = SplitBytesElements(req->inputs[0].bytes());
  ASSERT_TRUE(elems.ok());
  EXPECT_EQ(*elems, (std::vector<std::string_view>{"hello, world", "42"}));
}

TEST(RowEncoder, VariableDimensionsRunOneRowPerRequest) {
  auto enc = RowEncoder::Make(Spec({"a"}), Model(DataType::kFp32, {-1, 2}), {"id", "a"});
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->rows_per_request(), 1);
  auto b = enc->NewBatch();
  ASSERT_TRUE(enc->Append(MakeRow({std::string("k"), JsonText{"[1,2,3,4,5,6]"}}), &b).ok());
  EXPECT_EQ(enc->ToRequest(std::move(b), "m", "")->inputs[0].shape, (Shape{1, 3, 2}));
  auto odd = enc->NewBatch();
  EXPECT_FALSE(enc->Append(MakeRow({std::string("k"), JsonText{"[1,2,3]"}}), &odd).ok());
}

TEST(RowEncoder, DecodeSlicesEachRowsOutputs) {
  auto enc = RowEncoder::Make(Spec({"a", "b"}, {"y", "label"}), Model(DataType::kFp32, {2}), {"id", "a", "b"});
  ASSERT_TRUE(enc.ok());
  InferResponse r;
  const float y[] = {0.5f, 1.0f / 3, -2, 1e30f};
  r.outputs.push_back(Tensor::Copy("y", DataType::kFp32, {2, 2}, std::as_bytes(std::span<const float>(y))));
  std::string labels;
  AppendBytesElement(&labels, "cat");
  AppendBytesElement(&labels, "d\"og");
  r.outputs.push_back(Tensor::Copy("label", DataType::kBytes, {2, 1}, std::as_bytes(std::span<const char>(labels))));
  auto row1 = enc->Decode(r, 1, 2);
  ASSERT_TRUE(row1.ok()) << row1.status().message();
  EXPECT_EQ(std::get<JsonText>((*row1)[0]).text, "[-2,1e+30]");
  EXPECT_EQ(std::get<std::string>((*row1)[1]), "d\"og");
  auto row0 = enc->Decode(r, 0, 2);
  ASSERT_TRUE(row0.ok());
  EXPECT_EQ(std::get<JsonText>((*row0)[0]).text, "[0.5,0.33333334]");  // the shortest text that reads back as the float
  EXPECT_EQ(enc->Decode(r, 0, 3).status().code(), StatusCode::kInternal);  // fewer rows than asked
}

TEST(RowEncoder, NamesAreCheckedAgainstTheModel) {
  EXPECT_NE(RowEncoder::Make(Spec({"a"}), Model(DataType::kFp32, {-1, -1}), {"id", "a"})
                .status()
                .message()
                .find("more than one variable dimension"),
            std::string::npos);
  JobSpec unmapped = Spec({"a"});
  unmapped.inputs[0].tensor = "z";
  EXPECT_NE(
      RowEncoder::Make(unmapped, Model(DataType::kFp32, {1}), {"id", "a"}).status().message().find("does not take"),
      std::string::npos);
  ModelSpec two = Model(DataType::kFp32, {1});
  two.inputs.push_back(TensorSpec{"w", DataType::kFp32, {1}});
  EXPECT_NE(RowEncoder::Make(Spec({"a"}), two, {"id", "a"}).status().message().find("input 'w' is not mapped"),
            std::string::npos);
}

}  // namespace
}  // namespace inferd::jobs

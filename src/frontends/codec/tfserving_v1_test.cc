#include "frontends/codec/tfserving_v1.h"

#include <gtest/gtest.h>

#include "frontends/codec/json_tensor.h"

namespace inferd {
namespace {

std::string Flat(const Tensor& t) {
  std::string s;
  json::AppendFlatData(&s, t);
  return ShapeToString(t.shape) + s;
}

const std::vector<v1::InputInfo> kOne = {{"x", DataType::kFp32}};
const std::vector<v1::InputInfo> kTwo = {{"a", DataType::kInt32}, {"b", DataType::kBytes}};

TEST(TfServingV1, RowFormatStacksInstances) {
  auto r = v1::ParsePredictRequest(R"({"instances":[[1,2],[3,4],[5,6]]})", kOne, "m", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, v1::Format::kRow);
  EXPECT_EQ(Flat(r->request->inputs[0]), "[3,2][1,2,3,4,5,6]");
}

TEST(TfServingV1, RowFormatWithNamedInputsAndB64) {
  auto r = v1::ParsePredictRequest(R"({"instances":[{"a":1,"b":{"b64":"aGk="}},{"a":2,"b":"yo"}]})", kTwo, "m", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Flat(r->request->inputs[0]), "[2][1,2]");
  EXPECT_EQ(Flat(r->request->inputs[1]), R"([2]["hi","yo"])");
}

TEST(TfServingV1, ColumnarFormat) {
  auto r = v1::ParsePredictRequest(R"({"inputs":{"a":[[1],[2]],"b":[["x"],["y"]]}})", kTwo, "m", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format, v1::Format::kColumnar);
  EXPECT_EQ(Flat(r->request->inputs[0]), "[2,1][1,2]");
  auto single = v1::ParsePredictRequest(R"({"inputs":[[1,2]]})", kOne, "m", "");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(Flat(single->request->inputs[0]), "[1,2][1,2]");
}

TEST(TfServingV1, Errors) {
  for (const char* bad :
       {R"({"instances":[[1],[2]],"inputs":[[1]]})", R"({})", R"({"instances":[]})", R"({"instances":[[1,2],[3]]})",
        R"({"instances":[["a"]]})", R"([1])", R"({"instances":)", R"({"inputs":{"nope":[1]}})"}) {
    auto r = v1::ParsePredictRequest(bad, kOne, "m", "");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto needs_names = v1::ParsePredictRequest(R"({"instances":[1,2]})", kTwo, "m", "");
  EXPECT_FALSE(needs_names.ok());
}

TEST(TfServingV1, DeeplyNestedJsonIsAnErrorNotAStackOverflow) {
  // Found by fuzz_v1_predict: the recursive parser overflowed the stack.
  for (const std::string& deep : {R"({"instances":)" + std::string(1'000'000, '['),
                                  R"({"instances":)" + std::string(100'000, '[') + std::string(100'000, ']') + "}"}) {
    auto r = v1::ParsePredictRequest(deep, kOne, "m", "");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(TfServingV1, NumbersThatCrashedRapidjsonFullPrecisionParseSafely) {
  // Found by fuzz_v1_predict: an out-of-bounds read in rapidjson's StrtodDiyFp.
  auto r = v1::ParsePredictRequest(R"({"instances":[888888876.8000017368765888888888820e-339]})", kOne, "m", "");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Flat(r->request->inputs[0]), "[1][0]");
}

TEST(TfServingV1, EncodesPredictionsAndOutputs) {
  InferResponse resp;
  float f[4] = {1, 2, 3, 4};
  resp.outputs.push_back(Tensor::Copy("y", DataType::kFp32, {2, 2},
                                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(f), sizeof f)));
  EXPECT_EQ(*v1::EncodePredictResponse(resp, v1::Format::kRow), R"({"predictions":[[1,2],[3,4]]})");
  EXPECT_EQ(*v1::EncodePredictResponse(resp, v1::Format::kColumnar), R"({"outputs":[[1,2],[3,4]]})");
  int32_t k[2] = {7, 8};
  resp.outputs.push_back(Tensor::Copy("k", DataType::kInt32, {2},
                                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(k), sizeof k)));
  EXPECT_EQ(*v1::EncodePredictResponse(resp, v1::Format::kRow),
            R"({"predictions":[{"y":[1,2],"k":7},{"y":[3,4],"k":8}]})");
  EXPECT_EQ(*v1::EncodePredictResponse(resp, v1::Format::kColumnar), R"({"outputs":{"y":[[1,2],[3,4]],"k":[7,8]}})");
}

}  // namespace
}  // namespace inferd

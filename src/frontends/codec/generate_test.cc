#include "frontends/codec/generate.h"

#include <gtest/gtest.h>

#include "testing/test_requests.h"

namespace inferd::generate {
namespace {

const std::vector<InputInfo> kInputs = {{"text_input", DataType::kBytes, {-1, 1}},
                                        {"max_tokens", DataType::kInt32, {-1, 1}},
                                        {"x", DataType::kFp32, {-1, 2}}};

TEST(GenerateCodec, KeysBecomeInputsShapedToTheModelsRank) {
  auto r = ParseGenerateRequest(
      R"({"text_input": "hi", "max_tokens": 5, "x": [1, 2.5], "id": "q", "parameters": {"temperature": 0.5}})", kInputs,
      "m", "2");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const InferRequest& q = **r;
  EXPECT_EQ(q.model_name, "m");
  EXPECT_EQ(q.model_version, "2");
  EXPECT_EQ(q.id, "q");
  EXPECT_EQ(std::get<double>(q.parameters.at("temperature")), 0.5);
  ASSERT_EQ(q.inputs.size(), 3u);
  EXPECT_EQ(q.inputs[0].dtype, DataType::kBytes);
  EXPECT_EQ(q.inputs[0].shape, (Shape{1, 1}));
  EXPECT_EQ(q.inputs[1].dtype, DataType::kInt32);
  EXPECT_EQ(q.inputs[1].shape, (Shape{1, 1}));
  EXPECT_EQ(*reinterpret_cast<const int32_t*>(q.inputs[1].data), 5);
  EXPECT_EQ(q.inputs[2].shape, (Shape{1, 2}));
  EXPECT_EQ(testing::ToFloats(q.inputs[2]), (std::vector<float>{1, 2.5}));
}

TEST(GenerateCodec, BadRequestsAreErrors) {
  auto err = [](std::string_view body) {
    auto r = ParseGenerateRequest(body, kInputs, "m", "");
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(err("[1]"), "a generate request must be a JSON object");
  EXPECT_EQ(err(R"({"y": 1})"),
            "unexpected key 'y' in generate request: the model's inputs are text_input, max_tokens, x (plus 'id' and "
            "'parameters')");
  EXPECT_EQ(err(R"({"x": [[[1, 2]]]})"), "input 'x' has 3 dimensions; the model's input has 2");
  EXPECT_EQ(err(R"({"max_tokens": "five"})").find("input 'max_tokens'"), 0u) << err(R"({"max_tokens": "five"})");
  EXPECT_EQ(err(R"({"id": 3})"), "'id' must be a string");
  EXPECT_EQ(err(R"({"parameters": []})"), "request 'parameters' must be an object");
  EXPECT_EQ(err(R"({"x": [1, 2], "x": [3, 4]})"), "input 'x' is given twice");
  EXPECT_EQ(err("{").rfind("malformed generate request JSON", 0), 0u);
}

TEST(GenerateCodec, OutputsBecomeKeys) {
  InferResponse r;
  r.model_name = "m";
  r.model_version = "1";
  r.outputs.push_back(testing::F32("score", {1, 1}, {0.25f}));
  r.outputs.push_back(testing::F32("v", {1, 3}, {1, 2, 3}));
  EXPECT_EQ(EncodeGenerateResponse(r), R"({"model_name":"m","model_version":"1","score":0.25,"v":[1,2,3]})");
}

}  // namespace
}  // namespace inferd::generate

#include "frontends/grpc/grpc_codec.h"

#include <gtest/gtest.h>

#include <cstring>

namespace inferd::grpcfe {
namespace {

using inference::ModelInferRequest;
using inference::ModelInferResponse;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  std::vector<T> v(t.byte_size / sizeof(T));
  std::memcpy(v.data(), t.data, t.byte_size);
  return v;
}

template <typename T>
Tensor Make(const std::string& name, DataType dt, Shape shape, const std::vector<T>& v) {
  return Tensor::Copy(name, dt, std::move(shape), {reinterpret_cast<const std::byte*>(v.data()), v.size() * sizeof(T)});
}

ModelInferRequest::InferInputTensor* AddInput(ModelInferRequest* r, const std::string& name, const std::string& dt,
                                              Shape shape) {
  auto* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype(dt);
  in->mutable_shape()->Add(shape.begin(), shape.end());
  return in;
}

template <typename F, typename T>
void Fill(google::protobuf::RepeatedField<F>* field, std::initializer_list<T> values) {
  for (T v : values) field->Add(static_cast<F>(v));
}

Status DecodeError(ModelInferRequest r) {
  auto d = DecodeInferRequest(&r);
  return d.ok() ? Status::OK() : d.status();
}

TEST(GrpcCodec, ClassificationCountOfARequestedOutput) {
  ModelInferRequest r;
  AddInput(&r, "x", "FP32", {1})->mutable_contents()->mutable_fp32_contents()->Add(1.0f);
  auto* o = r.add_outputs();
  o->set_name("probs");
  (*o->mutable_parameters())["classification"].set_int64_param(3);  // tritonclient's class_count
  r.add_outputs()->set_name("other");
  auto d = DecodeInferRequest(&r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ((*d)->outputs.size(), 2u);
  EXPECT_EQ((*d)->outputs[0].classification, 3u);
  EXPECT_EQ((*d)->outputs[1].classification, 0u);
}

TEST(GrpcCodec, TypedContentsOfEveryDatatype) {
  ModelInferRequest r;
  r.set_model_name("m");
  r.set_model_version("2");
  r.set_id("id-1");
  Fill(AddInput(&r, "b", "BOOL", {3})->mutable_contents()->mutable_bool_contents(), {true, false, true});
  Fill(AddInput(&r, "i8", "INT8", {2})->mutable_contents()->mutable_int_contents(), {-128, 127});
  Fill(AddInput(&r, "i16", "INT16", {2})->mutable_contents()->mutable_int_contents(), {-300, 300});
  AddInput(&r, "i32", "INT32", {1})->mutable_contents()->mutable_int_contents()->Add(1 << 30);
  AddInput(&r, "i64", "INT64", {1})->mutable_contents()->mutable_int64_contents()->Add(int64_t{1} << 50);
  Fill(AddInput(&r, "u8", "UINT8", {2})->mutable_contents()->mutable_uint_contents(), {0, 255});
  AddInput(&r, "u16", "UINT16", {1})->mutable_contents()->mutable_uint_contents()->Add(65535);
  AddInput(&r, "u32", "UINT32", {1})->mutable_contents()->mutable_uint_contents()->Add(4000000000u);
  AddInput(&r, "u64", "UINT64", {1})->mutable_contents()->mutable_uint64_contents()->Add(uint64_t{1} << 63);
  Fill(AddInput(&r, "f16", "FP16", {2})->mutable_contents()->mutable_fp32_contents(), {0.5f, -1.25f});
  AddInput(&r, "bf16", "BF16", {1})->mutable_contents()->mutable_fp32_contents()->Add(2.0f);
  Fill(AddInput(&r, "f32", "FP32", {2, 1})->mutable_contents()->mutable_fp32_contents(), {1.5f, -2.5f});
  AddInput(&r, "f64", "FP64", {1})->mutable_contents()->mutable_fp64_contents()->Add(1e-300);
  auto* s = AddInput(&r, "s", "BYTES", {2})->mutable_contents()->mutable_bytes_contents();
  s->Add("ab");
  s->Add("");
  auto d = DecodeInferRequest(&r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const InferRequest& q = **d;
  EXPECT_EQ(q.model_name, "m");
  EXPECT_EQ(q.model_version, "2");
  EXPECT_EQ(q.id, "id-1");
  ASSERT_EQ(q.inputs.size(), 14u);
  for (const Tensor& t : q.inputs) EXPECT_TRUE(t.Validate().ok()) << t.name;
  EXPECT_EQ(Values<uint8_t>(q.inputs[0]), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(Values<int8_t>(q.inputs[1]), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(Values<int16_t>(q.inputs[2]), (std::vector<int16_t>{-300, 300}));
  EXPECT_EQ(Values<int32_t>(q.inputs[3]), (std::vector<int32_t>{1 << 30}));
  EXPECT_EQ(Values<int64_t>(q.inputs[4]), (std::vector<int64_t>{int64_t{1} << 50}));
  EXPECT_EQ(Values<uint8_t>(q.inputs[5]), (std::vector<uint8_t>{0, 255}));
  EXPECT_EQ(Values<uint16_t>(q.inputs[6]), (std::vector<uint16_t>{65535}));
  EXPECT_EQ(Values<uint32_t>(q.inputs[7]), (std::vector<uint32_t>{4000000000u}));
  EXPECT_EQ(Values<uint64_t>(q.inputs[8]), (std::vector<uint64_t>{uint64_t{1} << 63}));
  EXPECT_EQ(Values<uint16_t>(q.inputs[9]), (std::vector<uint16_t>{FloatToHalf(0.5f), FloatToHalf(-1.25f)}));
  EXPECT_EQ(Values<uint16_t>(q.inputs[10]), (std::vector<uint16_t>{FloatToBf16(2.0f)}));
  EXPECT_EQ(Values<float>(q.inputs[11]), (std::vector<float>{1.5f, -2.5f}));
  EXPECT_EQ(q.inputs[11].shape, (Shape{2, 1}));
  EXPECT_EQ(Values<double>(q.inputs[12]), (std::vector<double>{1e-300}));
  auto words = SplitBytesElements(q.inputs[13].bytes());
  ASSERT_TRUE(words.ok());
  EXPECT_EQ(*words, (std::vector<std::string_view>{"ab", ""}));

  // Encoding the decoded tensors as typed contents gives the same values back.
  InferResponse resp{"m", "2", "id-1", q.inputs};
  ModelInferResponse out;
  EncodeInferResponse(resp, false, &out);
  EXPECT_EQ(out.raw_output_contents_size(), 0);
  ASSERT_EQ(out.outputs_size(), 14);
  for (int i = 0; i < out.outputs_size(); ++i) {
    EXPECT_EQ(out.outputs(i).name(), r.inputs(i).name());
    EXPECT_EQ(out.outputs(i).datatype(), r.inputs(i).datatype());
    EXPECT_EQ(out.outputs(i).contents().SerializeAsString(), r.inputs(i).contents().SerializeAsString())
        << r.inputs(i).name();
  }
}

TEST(GrpcCodec, RawInputsAreMovedAndRawOutputsReturned) {
  ModelInferRequest r;
  AddInput(&r, "x", "FP32", {1, 2});
  AddInput(&r, "s", "BYTES", {1});
  const std::vector<float> x = {3.0f, 4.0f};
  r.add_raw_input_contents(reinterpret_cast<const char*>(x.data()), 8);
  std::string s;
  AppendBytesElement(&s, std::string_view("hey"));
  r.add_raw_input_contents(s);
  auto d = DecodeInferRequest(&r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(Values<float>((*d)->inputs[0]), x);
  EXPECT_TRUE(r.raw_input_contents(0).empty());  // moved, not copied
  InferResponse resp{"m", "1", "", (*d)->inputs};
  ModelInferResponse out;
  EncodeInferResponse(resp, true, &out);
  ASSERT_EQ(out.raw_output_contents_size(), 2);
  EXPECT_EQ(out.raw_output_contents(0), std::string(reinterpret_cast<const char*>(x.data()), 8));
  EXPECT_EQ(out.raw_output_contents(1), s);
  EXPECT_FALSE(out.outputs(0).has_contents());
  EXPECT_EQ(out.outputs(0).shape_size(), 2);
}

TEST(GrpcCodec, Fp16OutputsAsTypedContentsAreFloats) {
  const std::vector<uint16_t> h = {FloatToHalf(1.5f), FloatToHalf(-0.25f)};
  InferResponse resp{"m", "1", "", {Make("h", DataType::kFp16, {2}, h)}};
  ModelInferResponse out;
  EncodeInferResponse(resp, false, &out);
  ASSERT_EQ(out.outputs(0).contents().fp32_contents_size(), 2);
  EXPECT_EQ(out.outputs(0).contents().fp32_contents(0), 1.5f);
  EXPECT_EQ(out.outputs(0).contents().fp32_contents(1), -0.25f);
  EXPECT_EQ(out.outputs(0).datatype(), "FP16");
}

TEST(GrpcCodec, ResponseParameters) {
  InferResponse resp{"m", "1", "", {}};
  resp.parameters = {{"source", std::string("online")}, {"n", int64_t{-2}}, {"ok", false}, {"x", 0.25}};
  ModelInferResponse out;
  EncodeInferResponse(resp, false, &out);
  ASSERT_EQ(out.parameters_size(), 4);
  EXPECT_EQ(out.parameters().at("source").string_param(), "online");
  EXPECT_EQ(out.parameters().at("n").int64_param(), -2);
  EXPECT_FALSE(out.parameters().at("ok").bool_param());
  EXPECT_EQ(out.parameters().at("ok").parameter_choice_case(), inference::InferParameter::kBoolParam);
  EXPECT_EQ(out.parameters().at("x").double_param(), 0.25);
}

TEST(GrpcCodec, ParametersAndRequestedOutputs) {
  ModelInferRequest r;
  (*r.mutable_parameters())["priority"].set_uint64_param(2);
  (*r.mutable_parameters())["timeout"].set_int64_param(500);
  (*r.mutable_parameters())["flag"].set_bool_param(true);
  (*r.mutable_parameters())["ratio"].set_double_param(0.5);
  (*r.mutable_parameters())["tag"].set_string_param("x");
  r.add_outputs()->set_name("y");
  auto d = DecodeInferRequest(&r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const Parameters& p = (*d)->parameters;
  EXPECT_EQ(std::get<int64_t>(p.at("priority")), 2);
  EXPECT_EQ(std::get<int64_t>(p.at("timeout")), 500);
  EXPECT_EQ(std::get<bool>(p.at("flag")), true);
  EXPECT_EQ(std::get<double>(p.at("ratio")), 0.5);
  EXPECT_EQ(std::get<std::string>(p.at("tag")), "x");
  ASSERT_EQ((*d)->outputs.size(), 1u);
  EXPECT_EQ((*d)->outputs[0].name, "y");
}

TEST(GrpcCodec, MalformedRequestsAreInvalidArgument) {
  struct Case {
    std::string what;
    ModelInferRequest r;
    std::string text;
    StatusCode code = StatusCode::kInvalidArgument;
  };
  std::vector<Case> cases;
  auto fp32 = [](int n) {
    ModelInferRequest r;
    AddInput(&r, "x", "FP32", {n})->mutable_contents()->mutable_fp32_contents()->Add(1.0f);
    return r;
  };
  cases.push_back({"count", fp32(2), "needs 2, fp32_contents has 1"});
  {
    ModelInferRequest r = fp32(1);
    r.mutable_inputs(0)->mutable_contents()->add_int_contents(1);
    cases.push_back({"two fields", r, "carries int_contents"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "x", "INT8", {1})->mutable_contents()->add_int_contents(200);
    cases.push_back({"int8 range", r, "out of range for INT8"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "x", "UINT16", {1})->mutable_contents()->add_uint_contents(70000);
    cases.push_back({"uint16 range", r, "out of range for UINT16"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "x", "FP8", {1});
    cases.push_back({"datatype", r, "unknown datatype 'FP8'"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "x", "FP32", {-1});
    cases.push_back({"negative dim", r, "non-negative"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "x", "FP32", {int64_t{1} << 40, int64_t{1} << 40});
    cases.push_back({"huge shape", r, "too large"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "x", "FP32", {1});
    cases.push_back({"no data", r, "no contents"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "", "FP32", {1});
    cases.push_back({"no name", r, "no name"});
  }
  {
    ModelInferRequest r = fp32(1);
    AddInput(&r, "y", "FP32", {1});
    r.add_raw_input_contents(std::string(4, '\0'));
    cases.push_back({"raw count", r, "2 inputs"});
  }
  {
    ModelInferRequest r = fp32(1);
    r.add_raw_input_contents(std::string(4, '\0'));
    cases.push_back({"raw and contents", r, "has contents although"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "x", "FP32", {2});
    r.add_raw_input_contents(std::string(7, '\0'));
    cases.push_back({"raw size", r, "7 bytes"});
  }
  {
    ModelInferRequest r;
    AddInput(&r, "s", "BYTES", {1});
    r.add_raw_input_contents(std::string("\x05\0\0\0ab", 6));
    cases.push_back({"bytes truncated", r, ""});
  }
  {
    ModelInferRequest r = fp32(1);
    (*r.mutable_parameters())["p"].set_uint64_param(~uint64_t{0});
    cases.push_back({"uint64 param", r, "out of range"});
  }
  {
    ModelInferRequest r = fp32(1);
    (*r.mutable_parameters())["p"];
    cases.push_back({"empty param", r, "has no value"});
  }
  {
    ModelInferRequest r = fp32(1);
    r.add_outputs()->set_name("y");
    r.add_outputs()->set_name("y");
    cases.push_back({"output twice", r, "requested twice"});
  }
  {
    ModelInferRequest r = fp32(1);
    (*r.mutable_inputs(0)->mutable_parameters())["shared_memory_region"].set_string_param("r");
    cases.push_back({"shm", r, "shared memory", StatusCode::kUnimplemented});
  }
  {
    ModelInferRequest r = fp32(1);
    auto* o = r.add_outputs();
    o->set_name("y");
    (*o->mutable_parameters())["classification"].set_string_param("3");
    cases.push_back({"classification string", r, "'classification' must be an integer"});
  }
  {
    ModelInferRequest r = fp32(1);
    auto* o = r.add_outputs();
    o->set_name("y");
    (*o->mutable_parameters())["classification"].set_int64_param(0);
    cases.push_back({"classification 0", r, "'classification' must be >= 1"});
  }
  for (auto& c : cases) {
    Status st = DecodeError(c.r);
    EXPECT_EQ(st.code(), c.code) << c.what << ": " << st.ToString();
    EXPECT_NE(st.message().find(c.text), std::string::npos) << c.what << ": " << st.message();
  }
}

}  // namespace
}  // namespace inferd::grpcfe

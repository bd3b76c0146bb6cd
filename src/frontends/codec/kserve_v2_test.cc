#include "frontends/codec/kserve_v2.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "frontends/codec/json_tensor.h"

namespace inferd {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A canonical, human-readable dump of a parse result for golden comparison.
std::string Dump(const Result<std::unique_ptr<InferRequest>>& r) {
  if (!r.ok()) return "error " + r.status().ToString() + "\n";
  const InferRequest& q = *r.value();
  std::ostringstream o;
  o << "model " << q.model_name << " version '" << q.model_version << "' id '" << q.id << "'\n";
  for (const auto& [k, v] : q.parameters) {
    o << "param " << k << "=";
    std::visit([&](const auto& x) { o << x; }, v);
    o << "\n";
  }
  o << "binary_data_output " << q.binary_data_output << "\n";
  for (const auto& t : q.inputs) {
    std::string data;
    json::AppendFlatData(&data, t);
    o << "input " << t.name << " " << DataTypeToWire(t.dtype) << " " << ShapeToString(t.shape) << " " << data << "\n";
  }
  for (const auto& out : q.outputs)
    o << "output " << out.name << " binary=" << out.binary << " set=" << out.binary_set << "\n";
  return o.str();
}

// Runs `render` on every tests/golden/v2/NAME.request.json and compares its
// output with NAME<suffix>. INFERD_UPDATE_GOLDEN=1 rewrites the goldens and
// fails the test, so an update run can never pass by comparing a file with
// itself: review the diff, then run again without it. `render` returns
// nullopt to skip a request. Returns how many were checked.
int CheckGoldens(const std::string& suffix,
                 const std::function<std::optional<std::string>(std::shared_ptr<const std::string>)>& render) {
  const fs::path dir = fs::path(INFERD_SOURCE_DIR) / "tests/golden/v2";
  const bool update = std::getenv("INFERD_UPDATE_GOLDEN") != nullptr;
  const std::string ext = ".request.json";
  int checked = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() < ext.size() || name.substr(name.size() - ext.size()) != ext) continue;
    std::optional<std::string> got = render(std::make_shared<const std::string>(Read(e.path())));
    if (!got) continue;
    const fs::path golden = dir / (name.substr(0, name.size() - ext.size()) + suffix);
    ++checked;
    if (update) {
      std::ofstream(golden, std::ios::binary) << *got;
      ADD_FAILURE() << "rewrote " << golden << " (INFERD_UPDATE_GOLDEN): review it, then rerun without it";
      continue;
    }
    EXPECT_TRUE(fs::exists(golden)) << "missing golden " << golden << " (run with INFERD_UPDATE_GOLDEN=1)";
    EXPECT_EQ(*got, Read(golden)) << "golden mismatch for " << name;
  }
  return checked;
}

// How many golden files end in `suffix`.
int CountGoldens(const std::string& suffix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(INFERD_SOURCE_DIR) / "tests/golden/v2")) {
    const std::string name = e.path().filename().string();
    n += name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  }
  return n;
}

TEST(KServeV2Golden, ParsedRequestsMatchGoldenFiles) {
  const int checked = CheckGoldens(".parsed.txt", [](std::shared_ptr<const std::string> body) {
    return std::optional<std::string>(Dump(v2::ParseInferRequest(std::move(body), std::nullopt, "m", "")));
  });
  EXPECT_EQ(checked, CountGoldens(".request.json"));  // every request has its parse golden
  EXPECT_EQ(checked, 11);
}

// Each golden request that parses is answered with its inputs as outputs; the
// encoded response (honouring the request's binary options) must match
// NAME.response (JSON header, then any binary section).
TEST(KServeV2Golden, EncodedResponsesMatchGoldenFiles) {
  const int checked = CheckGoldens(".response", [](std::shared_ptr<const std::string> body) {
    auto parsed = v2::ParseInferRequest(std::move(body), std::nullopt, "m", "");
    if (!parsed.ok()) return std::optional<std::string>();
    InferResponse resp;
    resp.model_name = "m";
    resp.model_version = "1";
    resp.id = (*parsed)->id;
    resp.outputs = (*parsed)->inputs;
    for (size_t i = 0; i < resp.outputs.size() && i < (*parsed)->outputs.size(); ++i) {
      resp.outputs[i].name = (*parsed)->outputs[i].name;  // answer under the requested names
    }
    v2::EncodedResponse enc = v2::EncodeInferResponse(resp, v2::OutputOptionsOf(**parsed));
    std::string got = enc.body;
    if (enc.header_length) got = "header_length " + std::to_string(*enc.header_length) + "\n" + got;
    return std::optional<std::string>(std::move(got));
  });
  EXPECT_EQ(checked, CountGoldens(".response"));  // the requests that parse, each with its response golden
  EXPECT_EQ(checked, 4);
}

std::shared_ptr<const std::string> BinaryBody(const std::string& json, const std::string& binary, size_t* header) {
  *header = json.size();
  return std::make_shared<const std::string>(json + binary);
}

TEST(KServeV2Binary, ParsesBinaryTensorsWithoutCopying) {
  float f[3] = {1.5f, -2.f, 3.25f};
  std::string bin(reinterpret_cast<const char*>(f), sizeof f);
  bin += std::string("\x02\x00\x00\x00hi", 6);
  size_t hl;
  auto body =
      BinaryBody(R"({"inputs":[{"name":"a","shape":[3],"datatype":"FP32","parameters":{"binary_data_size":12}},)"
                 R"({"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}]})",
                 bin, &hl);
  auto r = v2::ParseInferRequest(body, hl, "m", "1");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Tensor& a = (*r)->inputs[0];
  EXPECT_EQ(a.data, reinterpret_cast<const std::byte*>(body->data()) + hl);  // a view, not a copy
  EXPECT_EQ(std::memcmp(a.data, f, sizeof f), 0);
  EXPECT_EQ((*r)->inputs[1].byte_size, 6u);
}

TEST(KServeV2, DeeplyNestedJsonIsAnErrorNotAStackOverflow) {
  const std::string head = R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":)";
  for (const std::string& deep :
       {head + std::string(1'000'000, '['), head + std::string(100'000, '[') + std::string(100'000, ']') + "}]}"}) {
    auto r = v2::ParseInferRequest(std::make_shared<const std::string>(deep), std::nullopt, "m", "");
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST(KServeV2Binary, RejectsSizeMismatches) {
  size_t hl;
  const std::string j =
      R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}]})";
  auto short_body = BinaryBody(j, std::string(4, '\0'), &hl);
  auto r = v2::ParseInferRequest(short_body, hl, "m", "");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("binary data"), std::string::npos) << r.status().message();

  auto extra = BinaryBody(j, std::string(12, '\0'), &hl);
  EXPECT_FALSE(v2::ParseInferRequest(extra, hl, "m", "").ok());

  auto wrong_shape =
      BinaryBody(R"({"inputs":[{"name":"a","shape":[3],"datatype":"FP32","parameters":{"binary_data_size":8}}]})",
                 std::string(8, '\0'), &hl);
  EXPECT_FALSE(v2::ParseInferRequest(wrong_shape, hl, "m", "").ok());

  auto body = std::make_shared<const std::string>(j + std::string(8, '\0'));
  EXPECT_FALSE(v2::ParseInferRequest(body, body->size() + 1, "m", "").ok());  // header length past the body
  EXPECT_FALSE(v2::ParseInferRequest(body, std::nullopt, "m", "").ok());      // no header length
  EXPECT_FALSE(v2::ParseInferRequest(body, 10, "m", "").ok());                // header cuts the JSON
}

TEST(KServeV2Encode, JsonAndBinaryOutputs) {
  InferResponse resp;
  resp.model_name = "m";
  resp.model_version = "3";
  resp.id = "x\"1";
  float f[2] = {0.1f, 2.f};
  resp.outputs.push_back(Tensor::Copy("y", DataType::kFp32, {1, 2},
                                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(f), sizeof f)));
  int64_t i[1] = {-5};
  resp.outputs.push_back(Tensor::Copy("z", DataType::kInt64, {1},
                                      std::span<const std::byte>(reinterpret_cast<const std::byte*>(i), sizeof i)));
  auto json = v2::EncodeInferResponse(resp, {});
  EXPECT_FALSE(json.header_length.has_value());
  EXPECT_EQ(
      json.body,
      R"({"model_name":"m","model_version":"3","id":"x\"1","outputs":[{"name":"y","datatype":"FP32","shape":[1,2],"data":[0.1,2]},)"
      R"({"name":"z","datatype":"INT64","shape":[1],"data":[-5]}]})");

  v2::OutputOptions opts;
  opts.binary_data_output = true;
  opts.outputs.push_back({"z", false, true});
  auto bin = v2::EncodeInferResponse(resp, opts);
  ASSERT_TRUE(bin.header_length.has_value());
  const std::string header = bin.body.substr(0, *bin.header_length);
  EXPECT_NE(header.find(R"("name":"y","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8})"),
            std::string::npos)
      << header;
  EXPECT_NE(header.find(R"("data":[-5])"), std::string::npos);
  ASSERT_EQ(bin.body.size(), *bin.header_length + 8);
  EXPECT_EQ(std::memcmp(bin.body.data() + *bin.header_length, f, 8), 0);
}

TEST(KServeV2Json, IntegerBoundsAreExact) {
  auto parse = [](const std::string& dt, const std::string& v) {
    auto body = std::make_shared<const std::string>(R"({"inputs":[{"name":"a","shape":[1],"datatype":")" + dt +
                                                    R"(","data":[)" + v + "]}]}");
    return v2::ParseInferRequest(body, std::nullopt, "m", "");
  };
  EXPECT_FALSE(parse("UINT64", "18446744073709551616.0").ok());  // 2^64 as a double (found by fuzzing)
  EXPECT_FALSE(parse("INT64", "9223372036854775808.0").ok());    // 2^63
  EXPECT_TRUE(parse("INT64", "-9223372036854775808.0").ok());    // -2^63 fits
  EXPECT_FALSE(parse("INT8", "128.0").ok());
  EXPECT_TRUE(parse("INT8", "-128.0").ok());
  EXPECT_TRUE(parse("FP32", "1e300").ok());  // overflows to +inf, without undefined behaviour
}

TEST(KServeV2Json, ClassificationCountOfARequestedOutput) {
  auto parse = [](const std::string& params) {
    auto body = std::make_shared<const std::string>(
        R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"p","parameters":)" +
        params + "}]}");
    return v2::ParseInferRequest(body, std::nullopt, "m", "");
  };
  auto ok = parse(R"({"classification":3,"binary_data":false})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)->outputs[0].classification, 3u);
  EXPECT_TRUE((*ok)->outputs[0].binary_set);
  for (const char* bad : {R"({"classification":0})", R"({"classification":"3"})", R"({"classification":2.5})",
                          R"({"classification":-1})", R"({"classification":4294967296})"}) {
    auto r = parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("'classification' must be an integer >= 1"), std::string::npos) << bad;
  }
}

TEST(KServeV2Encode, ResponseParameters) {
  InferResponse resp;
  resp.model_name = "m";
  resp.model_version = "1";
  resp.parameters = {{"source", std::string("precomputed")}, {"age_s", 2.5}, {"n", int64_t{3}}, {"hit", true}};
  EXPECT_EQ(
      v2::EncodeInferResponse(resp, {}).body,
      R"({"model_name":"m","model_version":"1","parameters":{"age_s":2.5,"hit":true,"n":3,"source":"precomputed"},)"
      R"("outputs":[]})");
}

TEST(KServeV2Encode, ErrorBodyIsEscaped) { EXPECT_EQ(v2::EncodeError("bad \"x\"\n"), R"({"error":"bad \"x\"\n"})"); }

TEST(KServeV2Decode, ABodyPastTheJsonLimitsIsRefusedBeforeItIsBuilt) {
  auto body = [](std::string s) { return std::make_shared<const std::string>(std::move(s)); };
  const std::string ok = R"({"inputs":[{"name":"a","shape":[4],"datatype":"FP32","data":[1,2,3,4]}]})";
  JsonLimits small;
  small.max_depth = 4;
  small.max_elements = 16;
  EXPECT_TRUE(v2::ParseInferRequest(body(ok), std::nullopt, "m", "", small).ok());
  // 12 values: the object, the "inputs" array, the input object, its name, the shape array and its 4, the
  // datatype, the data array and its 4 (keys are not values).
  small.max_elements = 12;
  EXPECT_TRUE(v2::ParseInferRequest(body(ok), std::nullopt, "m", "", small).ok());
  small.max_elements = 11;
  auto many = v2::ParseInferRequest(body(ok), std::nullopt, "m", "", small);
  EXPECT_EQ(many.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(many.status().message(), "the JSON body holds more than 11 values (--json-max-elements)");
  small.max_elements = 100;
  const std::string deep = R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":[[[[1]]]]}]})";
  auto too_deep = v2::ParseInferRequest(body(deep), std::nullopt, "m", "", small);
  EXPECT_EQ(too_deep.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(too_deep.status().message(), "the JSON body nests deeper than 4 levels (--json-max-depth)");
  // The defaults: a million values in a flat array pass; nesting past 64 does not (and never overflows a stack).
  std::string big = R"({"inputs":[{"name":"a","shape":[1000000],"datatype":"FP32","data":[)";
  for (int i = 0; i < 1000000; ++i) big += i ? ",1" : "1";
  big += "]}]}";
  EXPECT_TRUE(v2::ParseInferRequest(body(big), std::nullopt, "m", "").ok());
  const std::string nested = R"({"inputs":[{"name":"a","shape":[1],"datatype":"FP32","data":)" +
                             std::string(100000, '[') + "1" + std::string(100000, ']') + "}]}";
  EXPECT_EQ(v2::ParseInferRequest(body(nested), std::nullopt, "m", "").status().message(),
            "the JSON body nests deeper than 64 levels (--json-max-depth)");
  // Syntax errors keep their message.
  EXPECT_EQ(v2::ParseInferRequest(body("{\"inputs\": ["), std::nullopt, "m", "").status().message(),
            "malformed JSON in request body at offset 12: Invalid value.");
}

}  // namespace
}  // namespace inferd

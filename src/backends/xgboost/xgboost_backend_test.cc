// The XGBoost backends against python3-xgboost's own predictions
// (testdata/make_fixtures.py, run by ctest as the xgboost.fixtures test).
#include "backends/xgboost/xgboost_backend.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/xgboost/model_check.h"
#include "testing/temp_dir.h"

namespace inferd {
namespace {

const std::string kFixtures = INFERD_XGBOOST_FIXTURES;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<float> ReadFloats(const std::string& path) {
  const std::string b = ReadFile(path);
  std::vector<float> v(b.size() / sizeof(float));
  std::memcpy(v.data(), b.data(), v.size() * sizeof(float));
  return v;
}

Tensor Input(const std::vector<float>& x, int64_t rows, int64_t features) {
  return Tensor::Copy("input__0", DataType::kFp32, {rows, features},
                      std::as_bytes(std::span<const float>(x.data(), x.size())));
}

struct Case {
  std::string name, objective;
  int64_t features = 0, rows = 0;
  std::map<std::string, int64_t> outputs;  // kind -> width
};

std::vector<Case> Manifest() {
  rapidjson::Document d;
  const std::string text = ReadFile(kFixtures + "/manifest.json");
  d.Parse(text.c_str());
  std::vector<Case> cases;
  if (d.HasParseError() || !d.IsArray()) return cases;
  for (const auto& c : d.GetArray()) {
    Case k;
    k.name = c["name"].GetString();
    k.objective = c["objective"].GetString();
    k.features = c["features"].GetInt64();
    k.rows = c["rows"].GetInt64();
    for (const auto& o : c["outputs"].GetObject()) k.outputs[o.name.GetString()] = o.value.GetInt64();
    cases.push_back(std::move(k));
  }
  return cases;
}

ModelSpec Spec(const std::string& name, std::map<std::string, std::string> params = {}) {
  ModelSpec s;
  s.name = name;
  s.backend = "xgboost";
  s.max_batch_size = 64;
  s.parameters = std::move(params);
  return s;
}

// Loads `dir` with `spec` (auto-completing inputs/outputs) and runs `x`.
Result<Tensor> RunModel(Backend& backend, ModelSpec spec, const std::string& dir, const Tensor& x) {
  if (spec.inputs.empty()) INFERD_RETURN_IF_ERROR(backend.AutoComplete(dir, &spec));
  INFERD_ASSIGN_OR_RETURN(auto model, backend.Load(spec, dir));
  INFERD_ASSIGN_OR_RETURN(auto instance, model->CreateInstance(0));
  instance->OnWorkerThreadStart();
  INFERD_ASSIGN_OR_RETURN(auto out, instance->Execute({x}));
  if (out.size() != 1) return Status::Internal("expected one output");
  return std::move(out[0]);
}

void ExpectNear(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.dtype, DataType::kFp32) << what;
  ASSERT_EQ(static_cast<size_t>(got.element_count()), want.size()) << what;
  const float* g = got.as<float>();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(g[i], want[i], 1e-6) << what << " element " << i;
}

TEST(XgboostBackendTest, FixturesWereGenerated) { ASSERT_GE(Manifest().size(), 24u) << kFixtures; }

// Every model (binary, logitraw, softprob, softmax, regression, ranking, dart,
// gblinear) in every format (JSON, UBJSON, legacy binary) and every output
// kind equals python's predict within 1e-6.
TEST(XgboostBackendTest, OutputsEqualPythonPredict) {
  auto backend = MakeXgboostBackend();
  int checked = 0;
  for (const Case& c : Manifest()) {
    const std::string dir = kFixtures + "/" + c.name;
    const Tensor x = Input(ReadFloats(dir + "/x.f32"), c.rows, c.features);
    for (const auto& [kind, width] : c.outputs) {
      std::map<std::string, std::string> params;
      if (kind == "range") {
        params = {{"iteration_begin", "2"}, {"iteration_end", "5"}};
      } else {
        params = {{"predict_type", kind}};
      }
      const std::string what = c.name + " " + kind;
      auto out = RunModel(*backend, Spec(c.name, params), dir, x);
      ASSERT_TRUE(out.ok()) << what << ": " << out.status().ToString();
      EXPECT_EQ(out->shape, (Shape{c.rows, width})) << what;
      ExpectNear(*out, ReadFloats(dir + "/" + kind + ".f32"), what);
      ++checked;
    }
  }
  EXPECT_GE(checked, 70);
}

TEST(XgboostBackendTest, AutoCompleteWithoutConfigBatches) {
  auto backend = MakeXgboostBackend();
  ModelSpec spec;
  spec.name = "softprob";
  spec.backend = "xgboost";
  spec.auto_completed = true;  // no config.pbtxt
  ASSERT_TRUE(backend->AutoComplete(kFixtures + "/softprob_ubj", &spec).ok());
  EXPECT_EQ(spec.max_batch_size, 256);
  EXPECT_TRUE(spec.batching.dynamic);
  ASSERT_EQ(spec.inputs.size(), 1u);
  EXPECT_EQ(spec.inputs[0].name, "input__0");
  EXPECT_EQ(spec.inputs[0].dims, (Shape{6}));
  ASSERT_EQ(spec.outputs.size(), 1u);
  EXPECT_EQ(spec.outputs[0].name, "output__0");
  EXPECT_EQ(spec.outputs[0].dims, (Shape{3}));
}

TEST(XgboostBackendTest, UnbatchedConfigTakesAnyNumberOfRows) {
  auto backend = MakeXgboostBackend();
  ModelSpec spec = Spec("binary");
  spec.max_batch_size = 0;
  ASSERT_TRUE(backend->AutoComplete(kFixtures + "/binary_json", &spec).ok());
  EXPECT_EQ(spec.inputs[0].dims, (Shape{-1, 6}));
  EXPECT_EQ(spec.outputs[0].dims, (Shape{-1, 1}));
  const std::vector<float> x = ReadFloats(kFixtures + "/binary_json/x.f32");
  // One row given as a vector of features answers a vector of one value.
  auto out =
      RunModel(*backend, spec, kFixtures + "/binary_json",
               Tensor::Copy("input__0", DataType::kFp32, {6}, std::as_bytes(std::span<const float>(x.data(), 6))));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->shape, (Shape{1}));
  EXPECT_NEAR(out->as<float>()[0], ReadFloats(kFixtures + "/binary_json/value.f32")[0], 1e-6);
}

TEST(XgboostBackendTest, FilConfigurationOfTriton) {
  testing::TempDir tmp;
  ASSERT_TRUE(tmp.Write("1/xgboost.json", ReadFile(kFixtures + "/softprob_json/model.json")));
  ASSERT_TRUE(tmp.Write("2/xgboost.model", ReadFile(kFixtures + "/binary_bst/model.bst")));
  auto fil = MakeFilBackend();
  EXPECT_EQ(fil->name(), "fil");
  const std::vector<float> x = ReadFloats(kFixtures + "/softprob_json/x.f32");
  const Tensor in = Input(x, 37, 6);

  ModelSpec proba = Spec("fil", {{"model_type", "xgboost_json"}, {"output_class", "true"}, {"predict_proba", "true"}});
  proba.backend = "fil";
  auto out = RunModel(*fil, proba, tmp.Join("1"), in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(*out, ReadFloats(kFixtures + "/softprob_json/proba.f32"), "fil proba");

  ModelSpec cls = Spec("fil", {{"model_type", "xgboost_json"}, {"output_class", "true"}});
  cls.backend = "fil";
  out = RunModel(*fil, cls, tmp.Join("1"), in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(*out, ReadFloats(kFixtures + "/softprob_json/class.f32"), "fil class");

  // model_type defaults to the binary xgboost.model; output_class false: values.
  ModelSpec value = Spec("fil");
  value.backend = "fil";
  out = RunModel(*fil, value, tmp.Join("2"), in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(*out, ReadFloats(kFixtures + "/binary_bst/value.f32"), "fil value");

  // A threshold of 0.9 makes fewer positives than 0.5.
  ModelSpec strict = Spec("fil", {{"output_class", "true"}, {"threshold", "0.9"}});
  strict.backend = "fil";
  out = RunModel(*fil, strict, tmp.Join("2"), in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const std::vector<float> p = ReadFloats(kFixtures + "/binary_bst/value.f32");
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(out->as<float>()[i], p[i] > 0.9f ? 1.0f : 0.0f) << i;

  ModelSpec lgbm = Spec("fil", {{"model_type", "lightgbm"}});
  lgbm.backend = "fil";
  auto st = RunModel(*fil, lgbm, tmp.Join("2"), in).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("lightgbm"), std::string::npos) << st.message();
}

TEST(XgboostBackendTest, SeveralInstancesEachPredict) {
  auto backend = MakeXgboostBackend();
  ModelSpec spec = Spec("regression");
  spec.instance_count = 2;
  const std::string dir = kFixtures + "/regression_ubj";
  ASSERT_TRUE(backend->AutoComplete(dir, &spec).ok());
  auto model = backend->Load(spec, dir);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const Tensor x = Input(ReadFloats(dir + "/x.f32"), 37, 6);
  for (int i = 0; i < 2; ++i) {
    auto inst = (*model)->CreateInstance(i);
    ASSERT_TRUE(inst.ok()) << inst.status().ToString();
    auto out = (*inst)->Execute({x});
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    ExpectNear((*out)[0], ReadFloats(dir + "/value.f32"), "instance " + std::to_string(i));
  }
  EXPECT_NE((*model)->LoadNote().find("6 features"), std::string::npos) << (*model)->LoadNote();
}

Status LoadStatus(Backend& backend, ModelSpec spec, const std::string& dir) {
  if (spec.inputs.empty()) INFERD_RETURN_IF_ERROR(backend.AutoComplete(dir, &spec));
  return backend.Load(spec, dir).status();
}

TEST(XgboostBackendTest, BadConfigurationsFailTheLoadWithAReason) {
  auto backend = MakeXgboostBackend();
  const std::string reg = kFixtures + "/regression_json";
  struct Bad {
    std::map<std::string, std::string> params;
    std::string says;
  } bad[] = {
      {{{"predict_type", "class"}}, "classification objective"},
      {{{"predict_type", "probability"}}, "predict_type"},
      {{{"iteration_end", "99"}}, "boosted rounds"},
      {{{"iteration_begin", "3"}, {"iteration_end", "2"}}, "iteration_end"},
      {{{"nthread", "zero"}}, "nthread"},
      {{{"threshold", "high"}}, "threshold"},
  };
  for (const auto& b : bad) {
    const Status st = LoadStatus(*backend, Spec("m", b.params), reg);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << b.says;
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
  }
  // The config's feature count must be the model's.
  ModelSpec spec = Spec("m");
  TensorSpec in{"input__0", DataType::kFp32, {5}};
  spec.inputs = {in};
  Status st = LoadStatus(*backend, spec, reg);
  EXPECT_NE(st.message().find("6 features"), std::string::npos) << st.message();
  spec.inputs[0].dims = {6};
  spec.inputs[0].dtype = DataType::kFp64;
  st = LoadStatus(*backend, spec, reg);
  EXPECT_NE(st.message().find("TYPE_FP32"), std::string::npos) << st.message();
  spec.inputs[0].dtype = DataType::kFp32;
  spec.outputs = {TensorSpec{"output__0", DataType::kFp32, {3}}};
  st = LoadStatus(*backend, spec, reg);
  EXPECT_NE(st.message().find("1 value(s) per row"), std::string::npos) << st.message();
  // No model file.
  testing::TempDir empty;
  st = LoadStatus(*backend, Spec("m"), empty.path());
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("model.json"), std::string::npos) << st.message();
}

TEST(XgboostBackendTest, RequestsWithTheWrongFeatureCountAreRejected) {
  auto backend = MakeXgboostBackend();
  ModelSpec spec = Spec("binary");
  const std::string dir = kFixtures + "/binary_json";
  ASSERT_TRUE(backend->AutoComplete(dir, &spec).ok());
  auto model = backend->Load(spec, dir);
  ASSERT_TRUE(model.ok());
  auto inst = (*model)->CreateInstance(0);
  ASSERT_TRUE(inst.ok());
  std::vector<float> x(10, 1.0f);
  auto out = (*inst)->Execute({Input(x, 2, 5)});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("6 features"), std::string::npos) << out.status().message();
}

// Binary requests hand the backend views into the body at any offset.
TEST(XgboostBackendTest, MisalignedInputIsPredicted) {
  auto backend = MakeXgboostBackend();
  const std::string dir = kFixtures + "/binary_ubj";
  const std::vector<float> x = ReadFloats(dir + "/x.f32");
  auto buffer = std::make_shared<std::string>(1 + x.size() * sizeof(float), '\0');
  std::memcpy(buffer->data() + 1, x.data(), x.size() * sizeof(float));
  Tensor in;
  in.name = "input__0";
  in.dtype = DataType::kFp32;
  in.shape = {37, 6};
  in.owner = buffer;
  in.data = reinterpret_cast<const std::byte*>(buffer->data() + 1);
  in.byte_size = x.size() * sizeof(float);
  auto out = RunModel(*backend, Spec("binary"), dir, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectNear(*out, ReadFloats(dir + "/value.f32"), "misaligned");
}

// Corrupt model files fail the load with a message; none crashes.
TEST(XgboostBackendTest, CorruptModelFilesFailTheLoad) {
  auto backend = MakeXgboostBackend();
  const std::string json = ReadFile(kFixtures + "/binary_json/model.json");
  const std::string ubj = ReadFile(kFixtures + "/binary_ubj/model.ubj");
  const std::string bst = ReadFile(kFixtures + "/binary_bst/model.bst");
  auto replace_first = [](std::string s, const std::string& from, const std::string& to) {
    auto pos = s.find(from);
    if (pos != std::string::npos) s.replace(pos, from.size(), to);
    return s;
  };
  auto nested = [](int depth) {
    std::string s;
    for (int i = 0; i < depth; ++i) s += R"({"a":)";
    s += "1" + std::string(depth, '}');
    return s;
  };
  struct Bad {
    std::string name, file, bytes;
  } bad[] = {
      {"empty", "model.json", ""},
      {"truncated json", "model.json", json.substr(0, json.size() / 2)},
      {"truncated ubj", "model.ubj", ubj.substr(0, ubj.size() / 2)},
      {"truncated binary", "model.bst", bst.substr(0, bst.size() / 3)},
      {"garbage", "model.bst", std::string(4096, '\x7f')},
      {"not a model", "model.json", R"({"hello": "world"})"},
      {"child out of range", "model.json", replace_first(json, R"("left_children":[1,)", R"("left_children":[900,)")},
      {"cycle", "model.json", replace_first(json, R"("left_children":[1,)", R"("left_children":[0,)")},
      {"split on a missing feature", "model.json",
       replace_first(json, R"("split_indices":[)", R"("split_indices":[77,)")},
      // Found by fuzz_xgboost_model: the library keeps the last of repeated
      // keys (here two trees with id 0: a double free when loading).
      {"repeated key", "model.json", replace_first(json, R"("id":1,)", R"("id":1,"id":0,)")},
      {"deep nesting", "model.json", nested(100000)},
  };
  for (const auto& b : bad) {
    testing::TempDir tmp;
    ASSERT_TRUE(tmp.Write(b.file, b.bytes));
    const Status st = LoadStatus(*backend, Spec("m"), tmp.path());
    EXPECT_FALSE(st.ok()) << b.name;
    EXPECT_FALSE(st.message().empty()) << b.name;
  }
}

TEST(ModelCheckTest, NamesTheFault) {
  const std::string json = ReadFile(kFixtures + "/binary_json/model.json");
  auto ok = xgboost::CheckModelJson(json);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->booster, "gbtree");
  EXPECT_EQ(ok->objective, "binary:logistic");
  EXPECT_EQ(ok->num_feature, 6);
  EXPECT_EQ(ok->num_trees, 8);
  std::string bad = json;
  bad.replace(bad.find(R"("left_children":[1,)"), 19, R"("left_children":[900,)");
  auto st = xgboost::CheckModelJson(bad).status();
  EXPECT_NE(st.message().find("tree 0 node 0: child 900 outside"), std::string::npos) << st.message();
  // A non-root node whose parent is "none": libxgboost indexes its node
  // array with it while loading (found by fuzz_xgboost_model).
  std::string orphan = json;
  orphan.replace(orphan.find(R"("parents":[2147483647,0,)"), 24, R"("parents":[2147483647,2147483647,)");
  st = xgboost::CheckModelJson(orphan).status();
  EXPECT_NE(st.message().find("tree 0 node 1: parent 2147483647 outside 0.."), std::string::npos) << st.message();
  // More features than inferd serves (libxgboost's buffers grow with them).
  std::string wide = json;
  for (size_t at = wide.find(R"("num_feature":"6")"); at != std::string::npos; at = wide.find(R"("num_feature":"6")"))
    wide.replace(at, 17, R"("num_feature":"2000000")");
  st = xgboost::CheckModelJson(wide).status();
  EXPECT_NE(st.message().find("the model has 2000000 features (1 to 1048576 are served)"), std::string::npos)
      << st.message();
  // Children out of order: the library's predictor steps to left + 1.
  std::string swapped = json;
  swapped.replace(swapped.find(R"("left_children":[1,)"), 19, R"("left_children":[2,)");
  swapped.replace(swapped.find(R"("right_children":[2,)"), 20, R"("right_children":[1,)");
  st = xgboost::CheckModelJson(swapped).status();
  EXPECT_NE(st.message().find("tree 0 node 0: children 2 and 1 are not adjacent"), std::string::npos) << st.message();
}

TEST(XgboostBackendTest, ConfigWithoutBackendResolvesByModelFile) {
  BackendRegistry registry;
  ASSERT_TRUE(RegisterXgboostBackends(&registry).ok());
  auto b = registry.Resolve("", "", {"README", "model.ubj"});
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->name(), "xgboost");
  EXPECT_EQ((*registry.Resolve("fil", ""))->name(), "fil");
}

}  // namespace
}  // namespace inferd

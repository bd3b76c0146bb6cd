#include "repository/model_config.h"

#include <gtest/gtest.h>

#include "repository/repository.h"
#include "testing/memory_filesystem.h"

namespace inferd {
namespace {

constexpr const char* kFull = R"pb(
  name: "m"
  platform: "pytorch_libtorch"
  max_batch_size: 8
  version_policy { latest { num_versions: 2 } } input
  [ {
    name: "a"
    data_type: TYPE_FP32
    dims: [ 4 ]
  }
    , {
      name: "b"
      data_type: TYPE_INT64
      dims: [ -1 ]
      reshape { shape: [ -1 ] }
    }] output
  [ {
    name: "y"
    data_type: TYPE_FP32
    dims: [ 2, 2 ]
    reshape { shape: [ 4 ] }
  }]
  dynamic_batching {
    preferred_batch_size: [ 8, 4 ]
    max_queue_delay_microseconds: 300
    priority_levels: 3
    default_priority_level: 2
    default_queue_policy {
      timeout_action: DELAY
      default_timeout_microseconds: 5000
      allow_timeout_override: true
      max_queue_size: 7
    }
  } instance_group
  [ { count: 2 kind: KIND_CPU }
    , { kind: KIND_CPU }]
  parameters {
    key: "INTRA_OP_THREAD_COUNT"
    value: { string_value: "3" }
  }
)pb";

TEST(ModelConfig, ParsesEverySupportedField) {
  auto r = ParseModelConfig(kFull, "m", "m/config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ModelSpec& s = *r;
  EXPECT_EQ(s.backend, "");  // as written: the backend registry resolves the platform
  EXPECT_EQ(s.platform, "pytorch_libtorch");
  EXPECT_EQ(s.max_batch_size, 8);
  ASSERT_EQ(s.inputs.size(), 2u);
  EXPECT_EQ(s.inputs[0].dtype, DataType::kFp32);
  EXPECT_EQ(s.inputs[0].dims, (Shape{4}));
  EXPECT_EQ(s.inputs[1].dtype, DataType::kInt64);
  ASSERT_TRUE(s.outputs[0].reshape.has_value());
  EXPECT_EQ(*s.outputs[0].reshape, (Shape{4}));
  EXPECT_TRUE(s.batching.dynamic);
  EXPECT_EQ(s.batching.preferred_batch_sizes, (std::vector<int>{4, 8}));
  EXPECT_EQ(s.batching.max_queue_delay_us, 300u);
  EXPECT_EQ(s.batching.priority_levels, 3u);
  EXPECT_EQ(s.batching.default_priority_level, 2u);
  EXPECT_TRUE(s.batching.queue.delay_on_timeout);
  EXPECT_EQ(s.batching.queue.default_timeout_us, 5000u);
  EXPECT_TRUE(s.batching.queue.allow_timeout_override);
  EXPECT_EQ(s.batching.queue.max_queue_size, 7u);
  EXPECT_EQ(s.instance_count, 3);
  EXPECT_EQ(s.version_policy.kind, VersionPolicySpec::Kind::kLatest);
  EXPECT_EQ(s.version_policy.latest_n, 2u);
  EXPECT_EQ(s.parameters.at("INTRA_OP_THREAD_COUNT"), "3");
  EXPECT_TRUE(ValidateSpec(s, "x").ok());
}

// Fields Triton configs carry that do not change what inferd computes parse
// and are not acted on (a Triton repository loads unchanged).
TEST(ModelConfig, AcceptsTritonFieldsThatDoNotChangeTheAnswer) {
  const char* kTriton = R"(
name: "m"
platform: "onnxruntime_onnx"
runtime: "libtriton_onnxruntime.so"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 4, 4 ] is_non_linear_format_io: false } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 10 ] } ]
instance_group [ { count: 2 kind: KIND_CPU rate_limiter { resources [ { name: "R1" count: 4 } ] priority: 2 } } ]
optimization {
  graph { level: 1 }
  priority: PRIORITY_MAX
  execution_accelerators { cpu_execution_accelerator [ { name: "openvino" parameters { key: "a" value: "b" } } ] }
  input_pinned_memory { enable: false }
  cuda { graphs: true graph_spec [ { batch_size: 2 input { key: "x" value { dim: [ 3, 4, 4 ] } } } ] }
}
cc_model_filenames { key: "7.5" value: "model_75.onnx" }
metric_tags { key: "team" value: "vision" }
model_metrics { metric_control [ { metric_identifier { family: "nv_inference_request_duration" }
                                   histogram_options { buckets: [ 1, 10, 100 ] } } ] }
model_transaction_policy { decoupled: false }
dynamic_batching { }
)";
  auto r = ParseModelConfig(kTriton, "m", "m/config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->instance_count, 2);
  EXPECT_EQ(r->inputs[0].dims, (Shape{3, 4, 4}));
}

struct BadCase {
  const char* text;
  const char* must_mention;
};

// Names the case in test listings (ctest shows it).
void PrintTo(const BadCase& c, std::ostream* os) { *os << "mentions '" << c.must_mention << "'"; }

class ModelConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST(ModelConfig, DecoupledIsParsedForTheBackendToCheckAndRefusedForEnsembles) {
  auto r =
      ParseModelConfig("backend: \"python\"\nmodel_transaction_policy { decoupled: true }\n", "m", "m/config.pbtxt");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->decoupled);
  auto e = ParseModelConfig(
      "platform: \"ensemble\"\nmodel_transaction_policy { decoupled: true }\n"
      "ensemble_scheduling { step [ { model_name: \"a\" model_version: -1 } ] }\n",
      "m", "m/config.pbtxt");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("decoupled ensembles"), std::string::npos) << e.status().message();
}

TEST_P(ModelConfigErrors, NameTheFileAndField) {
  auto r = ParseModelConfig(GetParam().text, "m", "repo/m/config.pbtxt");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("repo/m/config.pbtxt"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find(GetParam().must_mention), std::string::npos) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, ModelConfigErrors,
    ::testing::Values(
        BadCase{"name: \"m\" bogus_field: 3", "bogus_field"}, BadCase{"name: \"other\"", "name"},
        BadCase{"max_batch_size: -1", "max_batch_size"},
        BadCase{"input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 0 ] } ]", "dims"},
        BadCase{"input [ { name: \"a\" dims: [ 1 ] } ]", "data_type"},
        BadCase{"input [ { name: \"a\" data_type: TYPE_FLOAT dims: [ 1 ] } ]", "TYPE_FLOAT"},
        BadCase{"max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 8 ] }", "preferred_batch_size"},
        BadCase{"dynamic_batching { }", "dynamic_batching"},
        BadCase{"instance_group [ { kind: KIND_GPU } ]", "KIND_GPU"},
        BadCase{"max_batch_size: 2 dynamic_batching { priority_levels: 2 default_priority_level: 3 }",
                "default_priority_level"},
        BadCase{"version_policy { latest { num_versions: 0 } }", "num_versions"},
        BadCase{"input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 3 ] } } ]", "reshape"},
        BadCase{"input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 1 ] ", "line"},
        BadCase{"output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] label_filename: \"../secret\" } ]",
                "label_filename"},
        BadCase{"output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] label_filename: \"/etc/passwd\" } ]",
                "label_filename"},
        BadCase{"output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                "parameters { key: \"rule:top\" value: { string_value: \"z | argmax\" } }",
                "rule 'top' reads output 'z', which the config does not list"},
        BadCase{"output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                "parameters { key: \"rule:y\" value: { string_value: \"y | argmax\" } }",
                "'y' is already an output of the model"},
        BadCase{"output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                "parameters { key: \"rule:top\" value: { string_value: \"y | sigmoid\" } }",
                "parameters.rule:top"},
        BadCase{"max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                "batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"n\" data_type: TYPE_INT32 "
                "source_input: \"nope\" } ]",
                "'nope' is not an input"},
        BadCase{"max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                "batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"x\" data_type: TYPE_INT32 "
                "source_input: \"x\" } ]",
                "must be a new name"},
        BadCase{"max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                "batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"n\" data_type: TYPE_FP16 "
                "source_input: \"x\" } ]",
                "TYPE_INT32, TYPE_INT64 or TYPE_FP32"},
        BadCase{"batch_output [ { target_name: \"y\" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: \"x\" } ]",
                "batch_output"},
        BadCase{"batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: \"n\" data_type: TYPE_INT32 "
                "source_input: \"x\" } ]",
                "needs max_batch_size > 0"},
        BadCase{"input [ { name: \"x\" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]",
                "ragged batching needs max_batch_size > 0"},
        BadCase{"model_operations { op_library_filename: \"libcustom.so\" }", "model_operations"},
        BadCase{"model_repository_agents { agents [ { name: \"checksum\" } ] }", "model_repository_agents"},
        BadCase{"sequence_batching { max_sequence_idle_microseconds: 5000000 direct { } "
                "control_input [ { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START "
                "int32_false_true: [ 0, 1 ] } ] } ] }",
                "sequence_batching"}));

TEST(ModelRepository, ReadsTheLabelFileOfEachOutputAndFailsWithoutIt) {
  auto fs = std::make_shared<testing::MemoryFilesystem>();
  fs->MakeDirectory("repo");
  fs->MakeDirectory("repo/m");
  fs->MakeDirectory("repo/m/1");
  fs->Put("repo/m/config.pbtxt",
          "max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 3 ] label_filename: \"labels.txt\" },\n"
          "         { name: \"z\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n");
  fs->Put("repo/m/labels.txt", "cat\r\ndog\n\nbird");
  ModelRepository repo("repo", fs);
  auto src = repo.ReadModel("m");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  ASSERT_NE(src->spec.outputs[0].labels, nullptr);
  EXPECT_EQ(*src->spec.outputs[0].labels, (std::vector<std::string>{"cat", "dog", "", "bird"}));
  EXPECT_EQ(src->spec.outputs[1].labels, nullptr);
  // A rule that labels an output without a label file fails the load.
  fs->Put("repo/m/config.pbtxt",
          "max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "output [ { name: \"z\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n"
          "parameters { key: \"rule:name\" value: { string_value: \"z | argmax | label\" } }\n");
  auto unlabelled = repo.ReadModel("m");
  ASSERT_FALSE(unlabelled.ok());
  EXPECT_NE(unlabelled.status().message().find("rule 'name' labels output 'z', which has no label_filename"),
            std::string::npos)
      << unlabelled.status().ToString();
  fs->Put("repo/m/config.pbtxt",
          "max_batch_size: 4\ninput [ { name: \"x\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
          "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 3 ] label_filename: \"labels.txt\" } ]\n");
  fs->Remove("repo/m/labels.txt");
  auto missing = repo.ReadModel("m");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cannot read label file 'labels.txt' of output 'y'"), std::string::npos)
      << missing.status().ToString();
}

TEST(ModelConfig, ValidateSpecRejectsDuplicatesAndMissingInputs) {
  auto r = ParseModelConfig(
      "input [ { name: \"a\" data_type: TYPE_FP32 dims: [ 1 ] }, { name: \"a\" data_type: TYPE_FP32 dims: [ 1 ] } ]",
      "m", "f");
  ASSERT_TRUE(r.ok());
  EXPECT_NE(ValidateSpec(*r, "f").message().find("duplicate input"), std::string::npos);
  auto empty = ParseModelConfig("", "m", "f");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->name, "m");  // filled from the directory
  EXPECT_FALSE(ValidateSpec(*empty, "f").ok());
}

TEST(ModelConfig, JsonConfigConvertsToText) {
  auto t = ModelConfigJsonToText(
      R"({"name":"m","max_batch_size":4,"input":[{"name":"a","data_type":"TYPE_FP32","dims":[2]}]})");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto s = ParseModelConfig(*t, "m", "f");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->max_batch_size, 4);
  EXPECT_EQ(s->inputs[0].dims, (Shape{2}));
  EXPECT_FALSE(ModelConfigJsonToText("{\"nope\":1}").ok());
}

TEST(ModelConfig, RenderedJsonUsesNumbersForInt64Fields) {
  auto s = ParseModelConfig(kFull, "m", "f");
  ASSERT_TRUE(s.ok());
  const std::string json = RenderModelConfigJson(kFull, *s);
  EXPECT_NE(json.find("\"dims\":[4]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"max_queue_delay_microseconds\":300"), std::string::npos) << json;
  EXPECT_NE(json.find("\"max_batch_size\":8"), std::string::npos) << json;
}

// Triton prints every scalar field of a config, zero or not: its own clients
// read config["max_batch_size"] of a model that does not batch.
TEST(ModelConfig, RenderedJsonPrintsZeroScalars) {
  constexpr const char* kNoBatch = R"pb(
    backend: "identity"
    input {
      name: "a"
      data_type: TYPE_FP32
      dims: [ 2 ]
    }
    output {
      name: "b"
      data_type: TYPE_FP32
      dims: [ 2 ]
    }
  )pb";
  auto s = ParseModelConfig(kNoBatch, "m", "f");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->max_batch_size, 0);
  const std::string json = RenderModelConfigJson(kNoBatch, *s);
  EXPECT_NE(json.find("\"max_batch_size\":0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"is_shape_tensor\":false"), std::string::npos) << json;
}

TEST(VersionPolicy, SelectsVersions) {
  const std::vector<int64_t> avail = {1, 2, 5, 9};
  VersionPolicySpec latest;
  latest.latest_n = 2;
  EXPECT_EQ(ModelRepository::SelectVersions(latest, avail), (std::vector<int64_t>{5, 9}));
  VersionPolicySpec all;
  all.kind = VersionPolicySpec::Kind::kAll;
  EXPECT_EQ(ModelRepository::SelectVersions(all, avail), avail);
  VersionPolicySpec specific;
  specific.kind = VersionPolicySpec::Kind::kSpecific;
  specific.versions = {2, 3, 9};
  EXPECT_EQ(ModelRepository::SelectVersions(specific, avail), (std::vector<int64_t>{2, 9}));
  latest.latest_n = 10;
  EXPECT_EQ(ModelRepository::SelectVersions(latest, avail), avail);
}

}  // namespace
}  // namespace inferd

#include "repository/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <set>

#include "model_config.pb.h"

namespace inferd {
namespace {

namespace pb = google::protobuf;

class CollectErrors : public pb::io::ErrorCollector {
 public:
  void AddError(int line, pb::io::ColumnNumber column, const std::string& message) override {
    if (!first_.empty()) return;
    first_ = "line " + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, pb::io::ColumnNumber, const std::string&) override {}
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

Status Bad(std::string_view source, const std::string& field, const std::string& why) {
  return Status::InvalidArgument(std::string(source) + ": field '" + field + "': " + why);
}

Result<EnsembleSpec> ToEnsembleSpec(std::string_view source, const config::ModelConfig& c) {
  if (c.platform() != "ensemble") return Bad(source, "ensemble_scheduling", "needs platform: \"ensemble\"");
  if (c.ensemble_scheduling().step_size() == 0) {
    return Bad(source, "ensemble_scheduling", "an ensemble needs at least one step");
  }
  if (c.has_dynamic_batching()) return Bad(source, "dynamic_batching", "an ensemble does not batch (its steps do)");
  if (c.model_warmup_size() > 0) return Bad(source, "model_warmup", "an ensemble has no warm-up (its steps do)");
  if (c.input_size() == 0 || c.output_size() == 0) {
    return Bad(source, c.input_size() == 0 ? "input" : "output", "an ensemble's config lists its inputs and outputs");
  }
  EnsembleSpec e;
  e.max_inflight = c.ensemble_scheduling().max_inflight_responses();
  int i = 0;
  for (const auto& step : c.ensemble_scheduling().step()) {
    const std::string where = "ensemble_scheduling.step[" + std::to_string(i++) + "]";
    if (step.model_name().empty()) return Bad(source, where + ".model_name", "must not be empty");
    if (!step.model_namespace().empty()) return Bad(source, where + ".model_namespace", "is reserved");
    if (step.model_version() < -1) {
      return Bad(source, where + ".model_version", "must be -1 (the default version) or a version number");
    }
    if (step.input_map().empty()) return Bad(source, where + ".input_map", "a step needs at least one input");
    if (step.output_map().empty()) return Bad(source, where + ".output_map", "a step needs at least one output");
    EnsembleStepSpec s;
    s.model_name = step.model_name();
    s.model_version = step.model_version() == 0 ? -1 : step.model_version();  // 0: not set
    s.input_map.insert(step.input_map().begin(), step.input_map().end());
    s.output_map.insert(step.output_map().begin(), step.output_map().end());
    e.steps.push_back(std::move(s));
  }
  return e;
}

Result<TensorSpec> ToTensorSpec(std::string_view source, const std::string& field, const std::string& name,
                                config::DataType dt, const pb::RepeatedField<int64_t>& dims,
                                const config::ModelTensorReshape* reshape, bool has_reshape) {
  TensorSpec t;
  t.name = name;
  if (name.empty()) return Bad(source, field + ".name", "must not be empty");
  if (dt == config::TYPE_INVALID)
    return Bad(source, field + ".data_type", "missing or TYPE_INVALID for '" + name + "'");
  t.dtype = static_cast<DataType>(dt);
  for (int64_t d : dims) {
    if (d < -1 || d == 0)
      return Bad(source, field + ".dims", "dimension " + std::to_string(d) + " of '" + name + "' must be >= 1 or -1");
    t.dims.push_back(d);
  }
  if (has_reshape) {
    Shape r(reshape->shape().begin(), reshape->shape().end());
    for (int64_t d : r)
      if (d < -1 || d == 0)
        return Bad(source, field + ".reshape",
                   "dimension " + std::to_string(d) + " of '" + name + "' must be >= 1 or -1");
    const int64_t a = ElementCount(t.dims), b = ElementCount(r);
    if (a >= 0 && b >= 0 && a != b) {
      return Bad(source, field + ".reshape",
                 "reshape " + ShapeToString(r) + " of '" + name + "' has a different element count than dims " +
                     ShapeToString(t.dims));
    }
    t.reshape = std::move(r);
  }
  return t;
}

// proto3 JSON prints 64-bit integers as strings; Triton's config endpoint
// prints numbers (its clients read dims as ints). Converts them back, guided
// by the message descriptors.
void Int64ToNumbers(const pb::Descriptor* d, rapidjson::Value& v) {
  if (!v.IsObject()) return;
  for (auto& m : v.GetObject()) {
    const pb::FieldDescriptor* f = d->FindFieldByName(m.name.GetString());
    if (!f) continue;
    auto fix_scalar = [&](rapidjson::Value& x) {
      if (!x.IsString()) return;
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64)
        x.SetInt64(std::strtoll(x.GetString(), nullptr, 10));
      else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_UINT64)
        x.SetUint64(std::strtoull(x.GetString(), nullptr, 10));
    };
    if (f->is_map()) {
      const pb::FieldDescriptor* value_field = f->message_type()->FindFieldByName("value");
      if (value_field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && m.value.IsObject())
        for (auto& e : m.value.GetObject()) Int64ToNumbers(value_field->message_type(), e.value);
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      if (m.value.IsArray())
        for (auto& e : m.value.GetArray()) Int64ToNumbers(f->message_type(), e);
      else
        Int64ToNumbers(f->message_type(), m.value);
    } else if (m.value.IsArray()) {
      for (auto& e : m.value.GetArray()) fix_scalar(e);
    } else {
      fix_scalar(m.value);
    }
  }
}

}  // namespace

Result<ModelSpec> ParseModelConfig(std::string_view text, std::string_view model_name, std::string_view source) {
  config::ModelConfig c;
  pb::TextFormat::Parser parser;
  CollectErrors errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(std::string(text), &c)) {
    return Status::InvalidArgument(std::string(source) + ": " +
                                   (errors.first().empty() ? "cannot parse" : errors.first()));
  }
  ModelSpec s;
  s.name = c.name().empty() ? std::string(model_name) : c.name();
  if (s.name != model_name) {
    return Bad(source, "name",
               "'" + c.name() + "' does not match the model directory '" + std::string(model_name) + "'");
  }
  // As written: the backend registry resolves them (backends/backend.h).
  s.platform = c.platform();
  s.backend = c.backend();
  if (c.max_batch_size() < 0) return Bad(source, "max_batch_size", "must be >= 0");
  s.max_batch_size = c.max_batch_size();
  s.default_model_filename = c.default_model_filename();

  for (int i = 0; i < c.input_size(); ++i) {
    const auto& in = c.input(i);
    if (in.is_shape_tensor()) return Bad(source, "input.is_shape_tensor", "shape tensors are not supported");
    INFERD_ASSIGN_OR_RETURN(TensorSpec t, ToTensorSpec(source, "input", in.name(), in.data_type(), in.dims(),
                                                       &in.reshape(), in.has_reshape()));
    t.optional = in.optional();
    t.ragged = in.allow_ragged_batch();
    if (t.ragged && c.max_batch_size() == 0)
      return Bad(source, "input.allow_ragged_batch", "'" + in.name() + "': ragged batching needs max_batch_size > 0");
    if (t.ragged && in.has_reshape())
      return Bad(source, "input.allow_ragged_batch", "'" + in.name() + "': a ragged input cannot have a reshape");
    s.inputs.push_back(std::move(t));
  }
  for (int i = 0; i < c.output_size(); ++i) {
    const auto& out = c.output(i);
    INFERD_ASSIGN_OR_RETURN(TensorSpec t, ToTensorSpec(source, "output", out.name(), out.data_type(), out.dims(),
                                                       &out.reshape(), out.has_reshape()));
    t.label_filename = out.label_filename();
    if (!t.label_filename.empty()) {
      const std::string& f = t.label_filename;
      if (f[0] == '/' || f == ".." || f.find("../") != std::string::npos || f.find("/..") != std::string::npos) {
        return Bad(source, "output.label_filename", "'" + f + "' must be a path inside the model folder");
      }
    }
    s.outputs.push_back(std::move(t));
  }

  if (c.has_dynamic_batching()) {
    const auto& db = c.dynamic_batching();
    if (s.max_batch_size == 0) return Bad(source, "dynamic_batching", "requires max_batch_size > 0");
    s.batching.dynamic = true;
    for (int p : db.preferred_batch_size()) {
      if (p < 1 || p > s.max_batch_size) {
        return Bad(source, "dynamic_batching.preferred_batch_size",
                   std::to_string(p) + " must be in [1, max_batch_size=" + std::to_string(s.max_batch_size) + "]");
      }
      s.batching.preferred_batch_sizes.push_back(p);
    }
    std::sort(s.batching.preferred_batch_sizes.begin(), s.batching.preferred_batch_sizes.end());
    s.batching.preferred_batch_sizes.erase(
        std::unique(s.batching.preferred_batch_sizes.begin(), s.batching.preferred_batch_sizes.end()),
        s.batching.preferred_batch_sizes.end());
    s.batching.max_queue_delay_us = db.max_queue_delay_microseconds();
    s.batching.preserve_ordering = db.preserve_ordering();
    s.batching.priority_levels = static_cast<uint32_t>(db.priority_levels());
    s.batching.default_priority_level = static_cast<uint32_t>(db.default_priority_level());
    if (s.batching.priority_levels > 1000) return Bad(source, "dynamic_batching.priority_levels", "must be <= 1000");
    if (s.batching.priority_levels > 0 &&
        (s.batching.default_priority_level < 1 || s.batching.default_priority_level > s.batching.priority_levels)) {
      return Bad(source, "dynamic_batching.default_priority_level",
                 "must be in [1, priority_levels=" + std::to_string(s.batching.priority_levels) + "]");
    }
    if (db.priority_queue_policy_size() > 0) {
      return Bad(source, "dynamic_batching.priority_queue_policy",
                 "per-priority queue policies are not supported; use default_queue_policy");
    }
    const auto& q = db.default_queue_policy();
    s.batching.queue.delay_on_timeout = q.timeout_action() == config::ModelQueuePolicy::DELAY;
    s.batching.queue.default_timeout_us = q.default_timeout_microseconds();
    s.batching.queue.allow_timeout_override = q.allow_timeout_override();
    s.batching.queue.max_queue_size = q.max_queue_size();
  }
  if (c.has_sequence_batching()) return Bad(source, "sequence_batching", "not supported by inferd yet");
  // Triton fields that would change what the model does if inferd ignored
  // them are refused; the others (optimization, rate_limiter, metric_tags,
  // model_metrics, runtime, cc_model_filenames, is_non_linear_format_io) are
  // accepted and not acted on.
  if (c.batch_output_size() > 0) return Bad(source, "batch_output", "not supported by inferd yet");
  for (const auto& bi : c.batch_input()) {
    BatchInputSpec b;
    if (s.max_batch_size == 0) return Bad(source, "batch_input", "needs max_batch_size > 0");
    if (bi.target_name_size() != 1 || bi.source_input_size() != 1)
      return Bad(source, "batch_input", "each entry needs exactly one target_name and one source_input");
    b.target = bi.target_name(0);
    b.source = bi.source_input(0);
    switch (bi.kind()) {
      case config::BatchInput::BATCH_ELEMENT_COUNT:
        b.kind = BatchInputSpec::Kind::kElementCount;
        break;
      case config::BatchInput::BATCH_ACCUMULATED_ELEMENT_COUNT:
        b.kind = BatchInputSpec::Kind::kAccumulatedElementCount;
        break;
      case config::BatchInput::BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO:
        b.kind = BatchInputSpec::Kind::kAccumulatedElementCountWithZero;
        break;
      case config::BatchInput::BATCH_MAX_ELEMENT_COUNT_AS_SHAPE:
        b.kind = BatchInputSpec::Kind::kMaxElementCountAsShape;
        break;
      case config::BatchInput::BATCH_ITEM_SHAPE:
        b.kind = BatchInputSpec::Kind::kItemShape;
        break;
      case config::BatchInput::BATCH_ITEM_SHAPE_FLATTEN:
        b.kind = BatchInputSpec::Kind::kItemShapeFlatten;
        break;
      default:
        return Bad(source, "batch_input.kind", "unknown kind");
    }
    const DataType dt = static_cast<DataType>(bi.data_type());
    if (dt != DataType::kInt32 && dt != DataType::kInt64 && dt != DataType::kFp32)
      return Bad(source, "batch_input.data_type", "'" + b.target + "' must be TYPE_INT32, TYPE_INT64 or TYPE_FP32");
    b.dtype = dt;
    if (b.target.empty() || s.FindInput(b.target))
      return Bad(source, "batch_input.target_name", "'" + b.target + "' must be a new name, not a config input");
    for (const auto& other : s.batch_inputs)
      if (other.target == b.target) return Bad(source, "batch_input.target_name", "'" + b.target + "' is used twice");
    const TensorSpec* src = s.FindInput(b.source);
    if (src == nullptr) return Bad(source, "batch_input.source_input", "'" + b.source + "' is not an input");
    b.source_index = static_cast<size_t>(src - s.inputs.data());
    s.batch_inputs.push_back(std::move(b));
  }
  // Decoupled (zero or more responses per request): the backend must answer
  // in parts (ModelVersion checks it at load).
  s.decoupled = c.model_transaction_policy().decoupled();
  s.response_cache = c.response_cache().enable();
  if (s.decoupled && (c.platform() == "ensemble" || c.has_ensemble_scheduling())) {
    return Bad(source, "model_transaction_policy.decoupled", "decoupled ensembles are not supported by inferd yet");
  }
  if (c.model_operations().op_library_filename_size() > 0) {
    return Bad(source, "model_operations.op_library_filename", "custom operation libraries are not supported");
  }
  if (c.model_repository_agents().agents_size() > 0) {
    return Bad(source, "model_repository_agents", "inferd runs no repository agents; remove them from the config");
  }
  if (c.platform() == "ensemble" || c.has_ensemble_scheduling()) {
    INFERD_ASSIGN_OR_RETURN(s.ensemble, ToEnsembleSpec(source, c));
  }

  int count = 0;
  for (const auto& g : c.instance_group()) {
    if (g.kind() == config::ModelInstanceGroup::KIND_GPU || g.gpus_size() > 0) {
      return Bad(source, "instance_group.kind", "KIND_GPU is not supported: inferd serves on CPU (use KIND_CPU)");
    }
    if (g.count() < 0) return Bad(source, "instance_group.count", "must be >= 1");
    count += g.count() == 0 ? 1 : g.count();
  }
  s.instance_count = count == 0 ? 1 : count;
  if (s.instance_count > 64) return Bad(source, "instance_group.count", "at most 64 instances per model");

  if (c.has_version_policy()) {
    const auto& vp = c.version_policy();
    if (vp.has_all()) {
      s.version_policy.kind = VersionPolicySpec::Kind::kAll;
    } else if (vp.has_specific()) {
      s.version_policy.kind = VersionPolicySpec::Kind::kSpecific;
      for (int64_t v : vp.specific().versions()) {
        if (v < 1) return Bad(source, "version_policy.specific.versions", "versions must be >= 1");
        s.version_policy.versions.push_back(v);
      }
      if (s.version_policy.versions.empty())
        return Bad(source, "version_policy.specific.versions", "must list at least one version");
    } else if (vp.has_latest()) {
      if (vp.latest().num_versions() < 1) return Bad(source, "version_policy.latest.num_versions", "must be >= 1");
      s.version_policy.latest_n = vp.latest().num_versions();
    }
  }
  for (const auto& [k, v] : c.parameters()) s.parameters[k] = v.string_value();
  for (const auto& [k, v] : s.parameters) {
    if (k.rfind("rule:", 0) != 0) continue;
    const std::string field = "parameters." + k;
    const std::string name = k.substr(5);
    if (name.empty()) return Bad(source, field, "a rule needs an output name after 'rule:'");
    auto rule = ParseOutputRule(name, v);
    if (!rule.ok()) return Bad(source, field, rule.status().message());
    if (s.FindOutput(name) != nullptr) return Bad(source, field, "'" + name + "' is already an output of the model");
    if (s.FindOutput(rule->source) == nullptr) {
      return Bad(source, field,
                 "rule '" + name + "' reads output '" + rule->source + "', which the config does not list");
    }
    s.rules.push_back(std::move(*rule));
  }
  {
    auto precomputed = ParsePrecomputedSpec(s.parameters, s);
    if (!precomputed.ok()) return Status::InvalidArgument(std::string(source) + ": " + precomputed.status().message());
    s.precomputed = std::move(*precomputed);
  }
  {
    auto batching = ParseBatchingParameters(s.parameters, s);
    if (!batching.ok()) return Status::InvalidArgument(std::string(source) + ": " + batching.status().message());
    s.batching.adaptive = batching->adaptive;
    s.batching.padding = std::move(batching->padding);
  }
  {
    auto compare = ParseCompareSpec(s.parameters, s);
    if (!compare.ok()) return Status::InvalidArgument(std::string(source) + ": " + compare.status().message());
    s.compare = std::move(*compare);
  }
  {
    auto features = ParseFeatureSpec(s.parameters, s);
    if (!features.ok()) return Status::InvalidArgument(std::string(source) + ": " + features.status().message());
    s.features = std::move(*features);
  }
  for (const auto& w : c.model_warmup()) {
    WarmupSpec ws;
    ws.name = w.name().empty() ? "warmup " + std::to_string(s.warmup.size() + 1) : w.name();
    const std::string field = "model_warmup '" + ws.name + "'";
    ws.batch_size = w.batch_size() == 0 ? 1 : w.batch_size();
    ws.count = w.count() == 0 ? 1 : w.count();
    if (ws.count > 1000) return Bad(source, field + ".count", "at most 1000");
    if (s.max_batch_size > 0 && ws.batch_size > static_cast<uint32_t>(s.max_batch_size))
      return Bad(source, field + ".batch_size", "exceeds max_batch_size " + std::to_string(s.max_batch_size));
    if (w.inputs().empty()) return Bad(source, field + ".inputs", "must name every model input");
    for (const auto& [name, in] : w.inputs()) {
      WarmupInputSpec wi;
      if (in.data_type() == config::TYPE_INVALID)
        return Bad(source, field + ".inputs.data_type", "missing for '" + name + "'");
      wi.dtype = static_cast<DataType>(in.data_type());
      for (int64_t d : in.dims()) {
        if (d < 1) return Bad(source, field + ".inputs.dims", "dimensions of '" + name + "' must be >= 1");
        wi.dims.push_back(d);
      }
      if (in.has_random_data() && in.random_data()) {
        wi.source = WarmupInputSpec::Source::kRandom;
      } else if (in.has_input_data_file()) {
        const std::string& f = in.input_data_file();
        if (f.empty() || f.find("..") != std::string::npos || f.front() == '/')
          return Bad(source, field + ".inputs.input_data_file", "must be a file name inside <model>/warmup/");
        wi.source = WarmupInputSpec::Source::kFile;
        wi.file = f;
      }
      ws.inputs[name] = std::move(wi);
    }
    s.warmup.push_back(std::move(ws));
  }
  return s;
}

Result<std::string> ModelConfigJsonToText(std::string_view json) {
  config::ModelConfig c;
  pb::util::JsonParseOptions opts;
  auto st = pb::util::JsonStringToMessage(std::string(json), &c, opts);
  if (!st.ok()) return Status::InvalidArgument("invalid JSON model config: " + std::string(st.message()));
  std::string text;
  pb::TextFormat::PrintToString(c, &text);
  return text;
}

Status ValidateSpec(const ModelSpec& s, std::string_view source) {
  if (s.inputs.empty()) return Bad(source, "input", "the model declares no inputs");
  std::set<std::string> names;
  for (const auto& t : s.inputs)
    if (!names.insert(t.name).second) return Bad(source, "input.name", "duplicate input '" + t.name + "'");
  names.clear();
  for (const auto& t : s.outputs)
    if (!names.insert(t.name).second) return Bad(source, "output.name", "duplicate output '" + t.name + "'");
  for (const auto& t : s.inputs) {
    if (t.dtype == DataType::kInvalid) return Bad(source, "input.data_type", "invalid for '" + t.name + "'");
    if (t.dims.empty() && s.max_batch_size == 0 && !t.any_rank) {
      return Bad(source, "input.dims", "'" + t.name + "' needs dims when max_batch_size is 0");
    }
  }
  return Status::OK();
}

std::string RenderModelConfigJson(std::string_view original_text, const ModelSpec& s) {
  config::ModelConfig c;
  pb::TextFormat::ParseFromString(std::string(original_text), &c);  // already validated
  c.set_name(s.name);
  if (c.backend().empty()) c.set_backend(s.backend);
  if (c.platform().empty()) c.set_platform(s.platform);
  c.set_max_batch_size(s.max_batch_size);
  auto fill = [](const TensorSpec& t, auto* msg) {
    msg->set_name(t.name);
    msg->set_data_type(static_cast<config::DataType>(t.dtype));
    msg->clear_dims();
    if (t.any_rank) msg->add_dims(-1);
    for (int64_t d : t.dims) msg->add_dims(d);
  };
  if (c.input_size() == 0)
    for (const auto& t : s.inputs) fill(t, c.add_input());
  if (c.output_size() == 0)
    for (const auto& t : s.outputs) fill(t, c.add_output());
  if (!c.has_dynamic_batching() && s.batching.dynamic) {  // turned on by auto-complete
    auto* b = c.mutable_dynamic_batching();
    for (int size : s.batching.preferred_batch_sizes) b->add_preferred_batch_size(size);
    b->set_max_queue_delay_microseconds(s.batching.max_queue_delay_us);
  }
  if (s.decoupled) c.mutable_model_transaction_policy()->set_decoupled(true);  // also when auto-completed
  if (c.instance_group_size() == 0) {
    auto* g = c.add_instance_group();
    g->set_count(s.instance_count);
    g->set_kind(config::ModelInstanceGroup::KIND_CPU);
  }
  std::string json;
  pb::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  // Every scalar field, zero or not, as Triton prints a config: clients read
  // config["max_batch_size"] without a default (Triton's auto_complete example).
  opts.always_print_primitive_fields = true;
  (void)pb::util::MessageToJsonString(c, &json, opts);
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError()) return json;
  Int64ToNumbers(config::ModelConfig::descriptor(), doc);
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  doc.Accept(w);
  return std::string(sb.GetString(), sb.GetSize());
}

}  // namespace inferd

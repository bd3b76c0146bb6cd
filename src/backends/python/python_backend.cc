#include "backends/python/python_backend.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "backends/python/python_worker.h"
#include "core/byte_size.h"

namespace inferd {
namespace {

using python::ModelSetup;
using python::PythonWorker;

class PythonInstance final : public ModelInstance {
 public:
  PythonInstance(std::shared_ptr<const ModelSetup> setup, int index, std::shared_ptr<PythonWorker> worker)
      : setup_(std::move(setup)), index_(index), worker_(std::move(worker)) {}
  ~PythonInstance() override {
    if (worker_) worker_->Stop();
  }

  bool takes_requests() const override { return true; }

  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& inputs) override {
    InferRequest r;
    r.model_name = setup_->model_name;
    r.inputs = inputs;
    auto results = ExecuteRequests({&r}, {});
    return std::move(results.front());
  }

  std::vector<Result<std::vector<Tensor>>> ExecuteRequests(const std::vector<const InferRequest*>& requests,
                                                           const std::vector<PartialSender>& partial) override {
    if (!worker_ || worker_->broken()) {
      auto w = PythonWorker::Start(setup_, index_);
      if (!w.ok()) {
        return std::vector<Result<std::vector<Tensor>>>(
            requests.size(),
            Status::Unavailable("model '" + setup_->model_name + "' instance " + std::to_string(index_) +
                                ": the Python worker could not start again: " + w.status().message()));
      }
      spdlog::warn("model '{}' version {} instance {}: Python worker started again (pid {})", setup_->model_name,
                   setup_->version, index_, (*w)->pid());
      worker_ = std::move(*w);
    }
    return worker_->Execute(requests, partial);
  }

 private:
  std::shared_ptr<const ModelSetup> setup_;
  const int index_;
  std::shared_ptr<PythonWorker> worker_;
};

class PythonModel final : public LoadedModel {
 public:
  explicit PythonModel(std::shared_ptr<const ModelSetup> setup) : setup_(std::move(setup)) {}
  Result<std::unique_ptr<ModelInstance>> CreateInstance(int index) override {
    INFERD_ASSIGN_OR_RETURN(auto worker, PythonWorker::Start(setup_, index));
    return std::unique_ptr<ModelInstance>(new PythonInstance(setup_, index, std::move(worker)));
  }
  std::string LoadNote() const override { return "Python worker per instance on " + setup_->python; }

 private:
  std::shared_ptr<const ModelSetup> setup_;
};

Result<double> SecondsParameter(const ModelSpec& spec, const char* key, double fallback) {
  auto it = spec.parameters.find(key);
  if (it == spec.parameters.end() || it->second.empty()) return fallback;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 86400 * 365) {
    return Status::InvalidArgument(std::string("parameter ") + key + " must be a number of seconds > 0, not '" +
                                   it->second + "'");
  }
  return v;
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

Result<uint64_t> BytesParameter(const ModelSpec& spec, const char* key, uint64_t fallback) {
  auto it = spec.parameters.find(key);
  if (it == spec.parameters.end() || it->second.empty()) return fallback;
  auto bytes = ParseByteSize(it->second);
  if (!bytes.ok() || *bytes < 4096) {
    return Status::InvalidArgument(std::string("parameter ") + key +
                                   " must be a byte size of at least 4096 (\"256MiB\", \"1GiB\", bytes), not '" +
                                   it->second + "'");
  }
  return *bytes;
}

Result<ModelSetup> MakeSetup(const ModelSpec& spec, const std::string& version_dir, const LoadContext& ctx) {
  ModelSetup s;
  s.model_name = spec.name;
  const std::filesystem::path vdir(version_dir);
  s.version = vdir.filename().string();
  s.version_dir = version_dir;
  s.model_dir = vdir.parent_path().string();
  const std::string file = spec.default_model_filename.empty() ? "model.py" : spec.default_model_filename;
  s.model_file = (vdir / file).string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(s.model_file, ec))
    return Status::InvalidArgument("the Python backend needs " + file + " in the version folder " + version_dir);
  s.config_json = ctx.config_json.empty() ? "{}" : ctx.config_json;
  s.submitter = ctx.submitter;
  s.decoupled = spec.decoupled;
  for (const auto& in : spec.inputs) s.input_names.push_back(in.name);
  if (spec.parameters.count("EXECUTION_ENV_PATH")) {
    return Status::InvalidArgument(
        "parameter EXECUTION_ENV_PATH (a packed conda environment) is not supported: set PYTHON_EXECUTABLE to the "
        "environment's python instead");
  }
  if (auto it = spec.parameters.find("PYTHON_EXECUTABLE"); it != spec.parameters.end() && !it->second.empty()) {
    s.python = it->second;
  }
  if (access(s.python.c_str(), X_OK) != 0)
    return Status::InvalidArgument("PYTHON_EXECUTABLE " + s.python + " is not an executable file");
  INFERD_ASSIGN_OR_RETURN(double init, SecondsParameter(spec, "INITIALIZE_TIMEOUT_SECONDS", 600));
  INFERD_ASSIGN_OR_RETURN(double exec, SecondsParameter(spec, "EXECUTE_TIMEOUT_SECONDS", 300));
  INFERD_ASSIGN_OR_RETURN(double fin, SecondsParameter(spec, "FINALIZE_TIMEOUT_SECONDS", 30));
  s.init_timeout = Millis(init);
  s.execute_timeout = Millis(exec);
  s.finalize_timeout = Millis(fin);
  INFERD_ASSIGN_OR_RETURN(s.shm_limit, BytesParameter(spec, "SHM_LIMIT_BYTES", 1ull << 30));
  if (auto it = spec.parameters.find("INTRA_OP_THREAD_COUNT"); it != spec.parameters.end()) {
    s.threads = std::max(1, std::atoi(it->second.c_str()));
  }
  return s;
}

// The config JSON auto_complete_config starts from: what config.pbtxt gave.
std::string ConfigJsonForAutoComplete(const ModelSpec& spec) {
  rapidjson::StringBuffer sb;
  rapidjson::Writer<rapidjson::StringBuffer> w(sb);
  w.StartObject();
  w.Key("name");
  w.String(spec.name.c_str());
  w.Key("backend");
  w.String("python");
  w.Key("max_batch_size");
  w.Int(spec.max_batch_size);
  w.Key("input");
  w.StartArray();
  w.EndArray();
  w.Key("output");
  w.StartArray();
  for (const auto& o : spec.outputs) {
    w.StartObject();
    w.Key("name");
    w.String(o.name.c_str());
    w.Key("data_type");
    const std::string dt(DataTypeToConfig(o.dtype));
    w.String(dt.c_str());
    w.Key("dims");
    w.StartArray();
    for (int64_t d : o.dims) w.Int64(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return std::string(sb.GetString(), sb.GetSize());
}

Status ReadTensors(const rapidjson::Value& config, const char* key, std::vector<TensorSpec>* out) {
  auto it = config.FindMember(key);
  if (it == config.MemberEnd()) return Status::OK();
  if (!it->value.IsArray())
    return Status::InvalidArgument(std::string("auto_complete_config: '") + key + "' is not a list");
  std::vector<TensorSpec> specs;
  for (const auto& t : it->value.GetArray()) {
    if (!t.IsObject() || !t.HasMember("name") || !t["name"].IsString() || !t.HasMember("data_type") ||
        !t["data_type"].IsString() || !t.HasMember("dims") || !t["dims"].IsArray()) {
      return Status::InvalidArgument(std::string("auto_complete_config: an entry of '") + key +
                                     "' needs name, data_type and dims");
    }
    TensorSpec s;
    s.name = t["name"].GetString();
    std::string dt = t["data_type"].GetString();
    if (dt.rfind("TYPE_", 0) == 0) dt = dt.substr(5);
    if (dt == "STRING") dt = "BYTES";
    auto dtype = DataTypeFromWire(dt);
    if (!dtype || *dtype == DataType::kInvalid)
      return Status::InvalidArgument("auto_complete_config: '" + s.name + "' has data_type '" + dt + "'");
    s.dtype = *dtype;
    for (const auto& d : t["dims"].GetArray()) {
      if (!d.IsInt64()) return Status::InvalidArgument("auto_complete_config: '" + s.name + "' has a bad dimension");
      s.dims.push_back(d.GetInt64());
    }
    specs.push_back(std::move(s));
  }
  *out = std::move(specs);
  return Status::OK();
}

class PythonBackend final : public Backend {
 public:
  std::string_view name() const override { return "python"; }
  std::vector<std::string> model_filenames() const override { return {"model.py"}; }
  bool supports_decoupled() const override { return true; }

  Status AutoComplete(const std::string& version_dir, ModelSpec* spec) override {
    INFERD_ASSIGN_OR_RETURN(ModelSetup setup, MakeSetup(*spec, version_dir, LoadContext{}));
    setup.config_json = ConfigJsonForAutoComplete(*spec);
    INFERD_ASSIGN_OR_RETURN(auto completed, PythonWorker::AutoCompleteConfig(setup));
    if (!completed.second) {
      return Status::InvalidArgument(
          "config.pbtxt lists no inputs and model.py's TritonPythonModel defines no auto_complete_config");
    }
    rapidjson::Document doc;
    doc.Parse(completed.first.c_str());
    if (doc.HasParseError() || !doc.IsObject())
      return Status::InvalidArgument("auto_complete_config returned no config");
    if (auto it = doc.FindMember("max_batch_size"); it != doc.MemberEnd() && it->value.IsInt())
      spec->max_batch_size = std::max(0, it->value.GetInt());
    INFERD_RETURN_IF_ERROR(ReadTensors(doc, "input", &spec->inputs));
    INFERD_RETURN_IF_ERROR(ReadTensors(doc, "output", &spec->outputs));
    if (doc.HasMember("dynamic_batching") && spec->max_batch_size > 0) spec->batching.dynamic = true;
    if (auto p = doc.FindMember("model_transaction_policy"); p != doc.MemberEnd() && p->value.IsObject()) {
      auto d = p->value.FindMember("decoupled");
      if (d != p->value.MemberEnd() && d->value.IsBool()) spec->decoupled = d->value.GetBool();
    }
    if (spec->inputs.empty()) return Status::InvalidArgument("auto_complete_config added no inputs");
    spec->auto_completed = true;
    return Status::OK();
  }

  Result<std::unique_ptr<LoadedModel>> Load(const ModelSpec& spec, const std::string& version_dir) override {
    return LoadWithContext(spec, version_dir, LoadContext{});
  }

  Result<std::unique_ptr<LoadedModel>> LoadWithContext(const ModelSpec& spec, const std::string& version_dir,
                                                       const LoadContext& context) override {
    for (const auto* list : {&spec.inputs, &spec.outputs})
      for (const auto& t : *list)
        if (t.dtype == DataType::kBf16)
          return Status::InvalidArgument("tensor '" + t.name + "': numpy has no BF16, so Python models cannot use it");
    INFERD_ASSIGN_OR_RETURN(ModelSetup setup, MakeSetup(spec, version_dir, context));
    return std::unique_ptr<LoadedModel>(new PythonModel(std::make_shared<const ModelSetup>(std::move(setup))));
  }
};

}  // namespace

std::unique_ptr<Backend> MakePythonBackend() { return std::make_unique<PythonBackend>(); }

Status RegisterPythonBackend(BackendRegistry* registry) { return registry->Register(MakePythonBackend()); }

}  // namespace inferd

#include "server/inference_server.h"

#include <spdlog/spdlog.h>

#include <charconv>
#include <filesystem>
#include <set>

#include "lifecycle/allocator.h"
#include "repository/model_config.h"
#include "server/request_validation.h"

namespace inferd {

namespace {
constexpr const char* kServerName = "inferd";
constexpr const char* kServerVersion = "0.1.0";

Result<int64_t> ParseVersion(const std::string& v) {
  int64_t n = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || p != v.data() + v.size() || n < 1) {
    return Status::InvalidArgument("invalid model version '" + v + "': versions are positive integers");
  }
  return n;
}

std::vector<TensorMetadata> ToMetadata(const ModelSpec& spec, const std::vector<TensorSpec>& ts) {
  std::vector<TensorMetadata> out;
  for (const auto& t : ts) {
    TensorMetadata m{t.name, t.dtype, {}};
    if (spec.max_batch_size > 0) m.shape.push_back(-1);
    if (t.any_rank) m.shape.push_back(-1);
    m.shape.insert(m.shape.end(), t.dims.begin(), t.dims.end());
    out.push_back(std::move(m));
  }
  return out;
}

DurationSnapshot Snap(const DurationStat& d) {
  return {d.count.load(std::memory_order_relaxed), d.ns.load(std::memory_order_relaxed)};
}
}  // namespace

InferenceServer::InferenceServer(ServerOptions options, const BackendRegistry* backends, Clock* clock)
    : options_(std::move(options)), backends_(backends), clock_(clock), repository_(options_.model_repository) {
  version_options_.default_max_queue_size = options_.default_max_queue_size;
  version_options_.default_intra_op_threads = options_.default_intra_op_threads;
  version_options_.clock = clock_;
}

InferenceServer::~InferenceServer() { Shutdown(); }

Status InferenceServer::Start() {
  INFERD_ASSIGN_OR_RETURN(std::vector<std::string> names, repository_.ListModels());
  std::vector<std::string> to_load;
  if (options_.control_mode == ModelControlMode::kNone) {
    to_load = names;
  } else {
    for (const auto& n : options_.startup_models) {
      if (n == "*") {
        to_load = names;
        break;
      }
      to_load.push_back(n);
    }
  }
  for (const auto& n : to_load) {
    Status st = LoadModel(n);
    if (!st.ok())
      spdlog::error("failed to load model '{}': {}", n, st.message());
    else
      spdlog::info("loaded model '{}'", n);
  }
  started_ = true;
  return Status::OK();
}

void InferenceServer::Shutdown() {
  if (shutting_down_.exchange(true)) return;
  std::map<std::string, ModelEntry> models;
  {
    std::lock_guard<std::mutex> load(load_mu_);
    std::unique_lock<std::shared_mutex> g(mu_);
    models.swap(models_);
  }
  for (auto& [name, e] : models)
    for (auto& [v, mv] : e.versions) mv->Drain();
  live_ = false;
}

bool InferenceServer::IsReady() const {
  if (!started_.load() || shutting_down_.load()) return false;
  if (!options_.strict_readiness) return true;
  std::shared_lock<std::shared_mutex> g(mu_);
  for (const auto& [n, e] : models_)
    if (e.versions.empty()) return false;
  return true;
}

ServerMetadata InferenceServer::GetServerMetadata() const {
  return {
      kServerName,
      kServerVersion,
      {"model_repository", "schedule_policy", "model_configuration", "binary_tensor_data", "parameters", "statistics"}};
}

Result<std::shared_ptr<ModelVersion>> InferenceServer::FindVersion(const std::string& name,
                                                                   const std::string& version) const {
  std::string reason;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && !it->second.versions.empty()) {
      const auto& versions = it->second.versions;
      if (version.empty()) return versions.rbegin()->second;
      INFERD_ASSIGN_OR_RETURN(int64_t v, ParseVersion(version));
      auto vit = versions.find(v);
      if (vit == versions.end()) {
        return Status::NotFound("Request for unknown model: '" + name + "' version " + version + " is not found");
      }
      return vit->second;
    }
    if (it != models_.end()) reason = it->second.reason.empty() ? "unloaded" : it->second.reason;
  }
  // Not serving: known to the repository (not ready) or unknown. Checked
  // outside the lock; a directory test, no config parsing.
  if (!reason.empty() || repository_.HasModel(name)) {
    return Status::Unavailable("model '" + name + "' is not ready" + (reason.empty() ? "" : ": " + reason));
  }
  return Status::NotFound("Request for unknown model: '" + name + "' is not found");
}

Result<ModelMetadata> InferenceServer::GetModelMetadata(const std::string& name, const std::string& version) const {
  INFERD_ASSIGN_OR_RETURN(auto mv, FindVersion(name, version));
  ModelMetadata md;
  md.name = name;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = models_.find(name);
    if (it != models_.end())
      for (const auto& [v, _] : it->second.versions) md.versions.push_back(std::to_string(v));
  }
  const ModelSpec& spec = mv->spec();
  md.platform = spec.platform.empty() ? spec.backend : spec.platform;
  md.resolved_version = mv->version_string();
  md.max_batch_size = spec.max_batch_size;
  md.inputs = ToMetadata(spec, spec.inputs);
  md.outputs = ToMetadata(spec, spec.outputs);
  return md;
}

Result<bool> InferenceServer::IsModelReady(const std::string& name, const std::string& version) const {
  auto mv = FindVersion(name, version);
  if (mv.ok()) return !shutting_down_.load();
  if (mv.status().code() == StatusCode::kUnavailable) return false;
  return mv.status();
}

Result<std::string> InferenceServer::GetModelConfigJson(const std::string& name, const std::string& version) const {
  INFERD_ASSIGN_OR_RETURN(auto mv, FindVersion(name, version));
  return mv->config_json();
}

Result<std::vector<ModelStatsSnapshot>> InferenceServer::GetStatistics(const std::string& name,
                                                                       const std::string& version) const {
  std::vector<std::shared_ptr<ModelVersion>> versions;
  if (name.empty()) {
    std::shared_lock<std::shared_mutex> g(mu_);
    for (const auto& [n, e] : models_)
      for (const auto& [v, mv] : e.versions) versions.push_back(mv);
  } else if (version.empty()) {
    INFERD_ASSIGN_OR_RETURN(auto any, FindVersion(name, ""));
    (void)any;
    std::shared_lock<std::shared_mutex> g(mu_);
    for (const auto& [v, mv] : models_.at(name).versions) versions.push_back(mv);
  } else {
    INFERD_ASSIGN_OR_RETURN(auto mv, FindVersion(name, version));
    versions.push_back(mv);
  }
  std::vector<ModelStatsSnapshot> out;
  for (const auto& mv : versions) {
    const ModelStats& s = *mv->stats();
    ModelStatsSnapshot snap;
    snap.name = s.model();
    snap.version = s.version();
    snap.last_inference_ms = s.last_inference_ms();
    snap.inference_count = s.inference_count();
    snap.execution_count = s.execution_count();
    snap.success = Snap(s.success());
    snap.fail = Snap(s.fail());
    snap.queue = Snap(s.queue());
    snap.compute_input = Snap(s.compute_input());
    snap.compute_infer = Snap(s.compute_infer());
    snap.compute_output = Snap(s.compute_output());
    snap.batch_stats = s.batch_stats();
    out.push_back(std::move(snap));
  }
  return out;
}

Result<std::vector<RepositoryIndexEntry>> InferenceServer::RepositoryIndex(bool ready_only) const {
  INFERD_ASSIGN_OR_RETURN(std::vector<std::string> names, repository_.ListModels());
  std::set<std::string> all(names.begin(), names.end());
  std::shared_lock<std::shared_mutex> g(mu_);
  for (const auto& [n, e] : models_) all.insert(n);
  std::vector<RepositoryIndexEntry> out;
  for (const auto& n : all) {
    auto it = models_.find(n);
    if (it != models_.end() && !it->second.versions.empty()) {
      for (const auto& [v, mv] : it->second.versions) out.push_back({n, std::to_string(v), "READY", ""});
      continue;
    }
    if (ready_only) continue;
    RepositoryIndexEntry e{n, "", "UNAVAILABLE", "unloaded"};
    if (it != models_.end()) {
      e.state = it->second.state;
      e.reason = it->second.reason;
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status InferenceServer::LoadModel(const std::string& name, const std::optional<std::string>& config_json) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  if (options_.control_mode == ModelControlMode::kNone && started_.load()) {
    return Status::FailedPrecondition("explicit model load / unload is not allowed with --model-control-mode=none");
  }
  std::optional<std::string> text;
  if (config_json) {
    INFERD_ASSIGN_OR_RETURN(std::string t, ModelConfigJsonToText(*config_json));
    text = std::move(t);
  }
  std::lock_guard<std::mutex> load(load_mu_);
  Status st = LoadModelLocked(name, text);
  if (!st.ok()) {
    std::unique_lock<std::shared_mutex> g(mu_);
    auto& e = models_[name];
    e.reason = st.message();
    if (e.versions.empty()) e.state = "UNAVAILABLE";
  }
  return st;
}

Status InferenceServer::LoadModelLocked(const std::string& name, const std::optional<std::string>& config_text) {
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_.ReadModel(name, config_text));
  Backend* backend = backends_->Find(src.spec.backend);
  if (!backend) {
    return Status::InvalidArgument(src.config_path + ": field 'backend': unknown backend '" + src.spec.backend +
                                   "' (available: pytorch, identity)");
  }
  std::vector<int64_t> versions = ModelRepository::SelectVersions(src.spec.version_policy, src.available_versions);
  if (versions.empty()) {
    return Status::NotFound("model '" + name + "' has no version folder that its version_policy selects in " + src.dir);
  }
  const std::string source = src.has_config ? (config_text ? "load request config for '" + name + "'" : src.config_path)
                                            : src.dir + " (auto-completed config)";
  std::map<int64_t, std::shared_ptr<ModelVersion>> loaded;
  for (int64_t v : versions) {
    const std::string dir = (std::filesystem::path(src.dir) / std::to_string(v)).string();
    auto mv = ModelVersion::Load(*backend, src.spec, v, dir, src.config_text, source, version_options_);
    if (!mv.ok()) return mv.status().WithPrefix("version " + std::to_string(v));
    loaded[v] = std::move(*mv);
  }
  std::map<int64_t, std::shared_ptr<ModelVersion>> old;
  {
    std::unique_lock<std::shared_mutex> g(mu_);
    auto& e = models_[name];
    old.swap(e.versions);
    e.versions = std::move(loaded);
    e.state = "READY";
    e.reason.clear();
  }
  for (auto& [v, mv] : old) mv->Drain();  // in-flight requests on old versions complete
  if (!old.empty()) {
    old.clear();
    allocator::ReleaseFreeMemory();
  }
  return Status::OK();
}

Status InferenceServer::UnloadModel(const std::string& name) {
  if (options_.control_mode == ModelControlMode::kNone) {
    return Status::FailedPrecondition("explicit model load / unload is not allowed with --model-control-mode=none");
  }
  std::map<int64_t, std::shared_ptr<ModelVersion>> old;
  {
    std::lock_guard<std::mutex> load(load_mu_);
    std::unique_lock<std::shared_mutex> g(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      if (!repository_.HasModel(name)) return Status::NotFound("model '" + name + "' is not in the repository");
      return Status::OK();
    }
    old.swap(it->second.versions);
    it->second.state = "UNAVAILABLE";
    it->second.reason = "unloaded";
  }
  for (auto& [v, mv] : old) mv->Drain();
  old.clear();  // the versions are released here unless a request still holds one
  allocator::ReleaseFreeMemory();
  return Status::OK();
}

void InferenceServer::InferAsync(std::unique_ptr<InferRequest> request, InferCallback callback) {
  const TimePoint arrival = clock_->Now();
  if (shutting_down_.load()) return callback(Status::Unavailable("the server is shutting down"));
  auto mv = FindVersion(request->model_name, request->model_version);
  if (!mv.ok()) return callback(mv.status());
  ModelVersion& version = **mv;
  Status st = ApplySchedulingParameters(request.get());
  Result<int64_t> rows = st.ok() ? ValidateAndNormalize(version.spec(), request.get()) : Result<int64_t>(st);
  if (!rows.ok()) {
    version.stats()->RecordFailure(FailureReason::kInvalid, 0);
    return callback(rows.status());
  }
  request->model_version = version.version_string();
  auto pending = std::make_unique<PendingRequest>();
  pending->request = std::move(request);
  pending->callback = std::move(callback);
  pending->rows = *rows;
  pending->arrival = arrival;
  st = version.scheduler().Enqueue(pending);
  if (!st.ok()) {
    version.stats()->RecordFailure(FailureReason::kRejected, 0);
    pending->callback(st);
  }
}

}  // namespace inferd

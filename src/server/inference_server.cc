#include "server/inference_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
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

// What a loaded version was built from: its config and its files (name,
// size, modification time). A version whose fingerprint is unchanged keeps
// serving on reload; one whose files changed is reloaded.
std::string Fingerprint(const std::string& config_text, const std::string& version_dir) {
  std::string fp = config_text;
  std::error_code ec;
  std::vector<std::string> files;
  for (auto it = std::filesystem::recursive_directory_iterator(version_dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const auto size = it->file_size(ec);
    const auto mtime = it->last_write_time(ec).time_since_epoch().count();
    files.push_back(it->path().string() + "|" + std::to_string(size) + "|" + std::to_string(mtime));
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) fp += "\n" + f;
  return fp;
}

DurationSnapshot Snap(const DurationStat& d) {
  return {d.count.load(std::memory_order_relaxed), d.ns.load(std::memory_order_relaxed)};
}
}  // namespace

int64_t InferenceServer::ModelEntry::DefaultVersion() const {
  if (versions.empty()) return 0;
  if (auto stable = labels.Find(kStableLabel); stable && versions.count(*stable)) return *stable;
  if (!policy_versions.empty()) return *policy_versions.rbegin();
  return versions.rbegin()->first;
}

uint64_t InferenceServer::ModelEntry::ResidentBytes() const {
  uint64_t b = 0;
  for (const auto& [v, mv] : versions) b += mv->resident_bytes();
  return b;
}

TimePoint InferenceServer::ModelEntry::LastUsed() const {
  TimePoint t{};
  for (const auto& [v, mv] : versions) t = std::max(t, mv->last_used());
  return t;
}

bool InferenceServer::ModelEntry::Busy() const {
  for (const auto& [v, mv] : versions)
    if (mv->busy()) return true;
  return false;
}

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
  if (options_.control_mode == ModelControlMode::kNone ||
      (options_.control_mode == ModelControlMode::kPoll && options_.startup_models.empty())) {
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
  if (options_.residency == Residency::kOnDemand) {
    loader_ = std::make_unique<OnDemandLoader>(
        options_.model_load_threads, clock_, [this](const std::string& m) { return EnsureResident(m); },
        [this](OnDemandLoader::Waiter w, const Status& st) {
          if (st.ok()) return Dispatch(std::move(w.request), std::move(w.callback), w.arrival, /*may_wait=*/false);
          if (st.code() == StatusCode::kDeadlineExceeded) lifecycle_.cold_start_timeouts.fetch_add(1);
          // A broken model is the server's problem, not a bad request: 503.
          const bool keep = st.code() == StatusCode::kDeadlineExceeded || st.code() == StatusCode::kUnavailable;
          w.callback(keep ? st : Status::Unavailable(st.message()));
        });
    const TimePoint t0 = clock_->Now();
    for (const auto& n : names) (void)IndexModelLocked(n);  // before serving: no other thread
    spdlog::info("indexed {} models for on-demand loading in {:.0f} ms", names.size(),
                 std::chrono::duration<double, std::milli>(clock_->Now() - t0).count());
    // Pinned models load now, as do the --load-model ones.
    std::set<std::string> pinned;
    {
      std::shared_lock<std::shared_mutex> g(mu_);
      for (const auto& [n, e] : models_)
        if (e.pinned) pinned.insert(n);
    }
    std::vector<std::string> wanted(pinned.begin(), pinned.end());
    for (const auto& n : options_.startup_models) {
      if (n == "*") {
        wanted = names;
        break;
      }
      if (!pinned.count(n)) wanted.push_back(n);
    }
    to_load = std::move(wanted);  // the rest load on demand
  }
  for (const auto& n : to_load) {
    Status st = LoadModel(n);
    if (!st.ok())
      spdlog::error("failed to load model '{}': {}", n, st.message());
    else
      spdlog::info("loaded model '{}'", n);
  }
  started_ = true;
  if (options_.control_mode == ModelControlMode::kPoll && options_.poll_interval.count() > 0) {
    poll_thread_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(poll_mu_);
      while (!poll_cv_.wait_for(lock, options_.poll_interval, [this] { return shutting_down_.load(); })) {
        lock.unlock();
        PollRepository();
        lock.lock();
      }
    });
  }
  return Status::OK();
}

void InferenceServer::Shutdown() {
  if (shutting_down_.exchange(true)) return;
  if (loader_) loader_->Stop();  // waiting requests are answered UNAVAILABLE
  {
    std::lock_guard<std::mutex> g(poll_mu_);  // the poller sees the flag before it waits again
  }
  poll_cv_.notify_all();
  if (poll_thread_.joinable()) poll_thread_.join();
  std::map<std::string, ModelEntry> models;
  model_locks_.AwaitIdle();  // loads in progress finish
  {
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
      if (version.empty()) return versions.at(it->second.DefaultVersion());
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

Result<std::shared_ptr<ModelVersion>> InferenceServer::FindVersionOrPrefetch(const std::string& name,
                                                                             const std::string& version) const {
  auto mv = FindVersion(name, version);
  if (!mv.ok() && CanWaitForLoad(mv.status())) {
    loader_->Enqueue(name, std::nullopt);
    return Status::Unavailable("model '" + name + "' is not resident; it is loading now (on-demand residency): retry");
  }
  return mv;
}

Result<ModelMetadata> InferenceServer::GetModelMetadata(const std::string& name, const std::string& version) const {
  INFERD_ASSIGN_OR_RETURN(auto mv, FindVersionOrPrefetch(name, version));
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
  if (mv.status().code() == StatusCode::kUnavailable) {
    // On demand, a model that is not resident is ready to serve: a request
    // loads it. Only a failed last load makes it not ready.
    if (!CanWaitForLoad(mv.status()) || shutting_down_.load()) return false;
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = models_.find(name);
    return it != models_.end() && !it->second.load_failed;
  }
  return mv.status();
}

Result<std::string> InferenceServer::GetModelConfigJson(const std::string& name, const std::string& version) const {
  INFERD_ASSIGN_OR_RETURN(auto mv, FindVersionOrPrefetch(name, version));
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
      if (!ready_only)
        for (const auto& [v, f] : it->second.failed)
          if (!it->second.versions.count(v)) out.push_back({n, std::to_string(v), "UNAVAILABLE", f.why});
      continue;
    }
    if (ready_only) continue;
    RepositoryIndexEntry e{n, "", "UNAVAILABLE", "unloaded"};
    if (it != models_.end()) e.reason = it->second.reason;
    if (loader_ && loader_->IsPending(n)) e.state = "LOADING";
    out.push_back(std::move(e));
  }
  return out;
}

Status InferenceServer::RequireExplicitControl() const {
  if (options_.control_mode == ModelControlMode::kExplicit) return Status::OK();
  return Status::FailedPrecondition(std::string("model load / unload is not allowed with --model-control-mode=") +
                                    (options_.control_mode == ModelControlMode::kPoll ? "poll" : "none") +
                                    " (it needs explicit)");
}

Status InferenceServer::LoadModel(const std::string& name, const std::optional<std::string>& config_json) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  if (started_.load()) INFERD_RETURN_IF_ERROR(RequireExplicitControl());
  std::optional<std::string> text;
  if (config_json) {
    INFERD_ASSIGN_OR_RETURN(std::string t, ModelConfigJsonToText(*config_json));
    text = std::move(t);
  }
  auto lock = model_locks_.Acquire(name);
  return LoadWithinBudgetLocked(name, text);
}

namespace {

// What a load works from: the model as the repository has it now, and the
// versions to serve (policy-selected, plus those labels point at).
struct LoadPlan {
  ModelSource src;
  Backend* backend = nullptr;
  VersionLabels labels;
  std::vector<int64_t> selected;
  std::set<int64_t> wanted;
  std::string config_source;  // names the config in error messages
  bool pinned = false;        // config parameter `pinned`
};

Result<LoadPlan> PlanLoad(const ModelRepository& repository, const BackendRegistry& backends, const std::string& name,
                          const std::optional<std::string>& config_text,
                          const std::optional<VersionLabels>& labels_override) {
  LoadPlan p;
  INFERD_ASSIGN_OR_RETURN(p.src, repository.ReadModel(name, config_text));
  p.backend = backends.Find(p.src.spec.backend);
  if (!p.backend) {
    return Status::InvalidArgument(p.src.config_path + ": field 'backend': unknown backend '" + p.src.spec.backend +
                                   "' (available: pytorch, identity)");
  }
  if (labels_override) {
    p.labels = *labels_override;
  } else {
    INFERD_ASSIGN_OR_RETURN(p.labels, ReadVersionLabels(p.src.dir));
  }
  const auto& available = p.src.available_versions;
  p.selected = ModelRepository::SelectVersions(p.src.spec.version_policy, available);
  p.wanted.insert(p.selected.begin(), p.selected.end());
  for (const auto& [label, v] : p.labels.labels)
    if (std::binary_search(available.begin(), available.end(), v)) p.wanted.insert(v);
  if (p.wanted.empty()) {
    return Status::NotFound("model '" + name + "' has no version folder that its version_policy selects in " +
                            p.src.dir);
  }
  p.config_source = p.src.has_config ? (config_text ? "load request config for '" + name + "'" : p.src.config_path)
                                     : p.src.dir + " (auto-completed config)";
  auto pinned = PinnedParameter(p.src.spec);
  if (!pinned.ok()) return pinned.status().WithPrefix(p.config_source);
  p.pinned = *pinned;
  return p;
}

}  // namespace

Status InferenceServer::LoadModelLocked(const std::string& name, const std::optional<std::string>& config_text,
                                        const std::optional<VersionLabels>& labels_override, bool retry_failed) {
  auto plan = PlanLoad(repository_, *backends_, name, config_text, labels_override);
  if (!plan.ok()) {
    lifecycle_.load_failures.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::shared_mutex> g(mu_);
    auto& e = models_[name];
    e.reason = plan.status().message();
    e.load_failed = e.versions.empty();
    return plan.status();
  }
  const ModelSource& src = plan->src;
  std::map<int64_t, std::shared_ptr<ModelVersion>> current;
  std::map<int64_t, std::string> current_fp;
  std::map<int64_t, ModelEntry::FailedVersion> known_failed;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    if (auto it = models_.find(name); it != models_.end()) {
      current = it->second.versions;
      current_fp = it->second.fingerprints;
      known_failed = it->second.failed;
    }
  }
  // Load new and changed versions; nothing serving changes yet.
  std::map<int64_t, std::shared_ptr<ModelVersion>> next;
  std::map<int64_t, std::string> next_fp;
  std::map<int64_t, ModelEntry::FailedVersion> failed;
  Status first_error;  // of this attempt (versions skipped as known failures are not errors)
  for (int64_t v : plan->wanted) {
    const std::string dir = (std::filesystem::path(src.dir) / std::to_string(v)).string();
    std::string fp = Fingerprint(src.config_text, dir);
    if (auto it = current.find(v); it != current.end() && current_fp[v] == fp) {
      next[v] = it->second;  // unchanged snapshot: keeps serving as is
      next_fp[v] = std::move(fp);
      continue;
    }
    if (auto it = known_failed.find(v); !retry_failed && it != known_failed.end() && it->second.fingerprint == fp) {
      failed[v] = it->second;  // same files as the failed attempt: not retried
      continue;
    }
    const TimePoint t0 = clock_->Now();
    auto mv =
        ModelVersion::Load(*plan->backend, src.spec, v, dir, src.config_text, plan->config_source, version_options_);
    lifecycle_.load_seconds.Observe(std::chrono::duration<double>(clock_->Now() - t0).count());
    if (!mv.ok()) {
      lifecycle_.load_failures.fetch_add(1, std::memory_order_relaxed);
      failed[v] = {mv.status().message(), std::move(fp)};
      if (first_error.ok()) first_error = Status::Unavailable("version " + std::to_string(v) + ": " + failed[v].why);
      spdlog::error("model '{}' version {} failed to load: {}", name, v, mv.status().message());
      continue;
    }
    next[v] = std::move(*mv);
    next_fp[v] = std::move(fp);
  }
  // A version that failed never replaces a serving one: keep every serving
  // version the new set does not have.
  if (!failed.empty()) {
    for (auto& [v, mv] : current) {
      if (next.count(v)) continue;
      next[v] = mv;
      next_fp[v] = current_fp[v];
    }
  }
  std::map<int64_t, std::shared_ptr<ModelVersion>> retired;
  {
    std::unique_lock<std::shared_mutex> g(mu_);
    auto& e = models_[name];
    if (!next.empty()) {
      for (auto& [v, mv] : e.versions)
        if (auto it = next.find(v); it == next.end() || it->second != mv) retired[v] = mv;
      if (e.versions != next) e.loaded_at = clock_->Now();
      e.versions = std::move(next);
      e.fingerprints = std::move(next_fp);
      e.last_bytes = e.ResidentBytes();
      e.policy_versions.clear();
      for (int64_t v : plan->selected)
        if (e.versions.count(v)) e.policy_versions.insert(v);
    }
    // Labels requested by a caller (set label, rollback) apply only if their
    // versions loaded; labels read from the repository always apply.
    if (!labels_override || first_error.ok()) e.labels = std::move(plan->labels);
    e.dir = src.dir;
    e.pinned = plan->pinned;
    e.load_failed = e.versions.empty() && !failed.empty();
    e.reason.clear();
    for (const auto& [v, f] : failed)
      e.reason += (e.reason.empty() ? "" : "; ") + ("version " + std::to_string(v) + ": " + f.why);
    e.failed = std::move(failed);
    if (!e.versions.empty()) {
      Status st = SaveLabelsLocked(e, /*always=*/false);
      if (!st.ok()) spdlog::warn("cannot persist version labels: {}", st.message());
    }
  }
  ReleaseVersions(std::move(retired));  // in-flight requests on them complete first
  return first_error;
}

Status InferenceServer::SaveLabelsLocked(ModelEntry& e, bool always) {
  const int64_t d = e.DefaultVersion();
  const bool changed = d != 0 && e.labels.RecordDefault(d);
  if ((!always && !changed) || e.dir.empty()) return Status::OK();
  return WriteVersionLabels(e.dir, e.labels);
}

const InferenceServer::ModelEntry* InferenceServer::ServingEntryLocked(const std::string& name) const {
  auto it = models_.find(name);
  return it == models_.end() || it->second.versions.empty() ? nullptr : &it->second;
}

void InferenceServer::ReleaseVersions(std::map<int64_t, std::shared_ptr<ModelVersion>> old) {
  if (old.empty()) return;
  const TimePoint t0 = clock_->Now();
  for (auto& [v, mv] : old) mv->Drain();
  old.clear();  // released here unless a request still holds one
  allocator::ReleaseFreeMemory();
  lifecycle_.unload_seconds.Observe(std::chrono::duration<double>(clock_->Now() - t0).count());
}

Status InferenceServer::UnloadModel(const std::string& name) {
  INFERD_RETURN_IF_ERROR(RequireExplicitControl());
  std::map<int64_t, std::shared_ptr<ModelVersion>> old;
  {
    auto lock = model_locks_.Acquire(name);
    std::unique_lock<std::shared_mutex> g(mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      if (!repository_.HasModel(name)) return Status::NotFound("model '" + name + "' is not in the repository");
      return Status::OK();
    }
    old.swap(it->second.versions);
    it->second.fingerprints.clear();
    it->second.policy_versions.clear();
    it->second.failed.clear();
    it->second.reason = "unloaded";
  }
  ReleaseVersions(std::move(old));
  return Status::OK();
}

void InferenceServer::InferAsync(std::unique_ptr<InferRequest> request, InferCallback callback) {
  Dispatch(std::move(request), std::move(callback), clock_->Now(), /*may_wait=*/true);
}

bool InferenceServer::CanWaitForLoad(const Status& lookup) const {
  return loader_ && lookup.code() == StatusCode::kUnavailable && !shutting_down_.load();
}

void InferenceServer::WaitForLoad(std::unique_ptr<InferRequest> request, InferCallback callback, TimePoint arrival) {
  if (Status st = ApplySchedulingParameters(request.get()); !st.ok()) return callback(st);
  Duration wait = options_.load_wait;
  if (request->timeout_us > 0) wait = std::min<Duration>(wait, std::chrono::microseconds(request->timeout_us));
  lifecycle_.cold_starts.fetch_add(1, std::memory_order_relaxed);
  const std::string name = request->model_name;
  loader_->Enqueue(name, OnDemandLoader::Waiter{std::move(request), std::move(callback), arrival, arrival + wait});
}

void InferenceServer::Dispatch(std::unique_ptr<InferRequest> request, InferCallback callback, TimePoint arrival,
                               bool may_wait) {
  if (shutting_down_.load()) return callback(Status::Unavailable("the server is shutting down"));
  auto mv = FindVersion(request->model_name, request->model_version);
  if (!mv.ok()) {
    if (may_wait && CanWaitForLoad(mv.status())) return WaitForLoad(std::move(request), std::move(callback), arrival);
    return callback(mv.status());
  }
  ModelVersion& version = **mv;
  version.Touch(arrival);
  Status st = ApplySchedulingParameters(request.get());
  Result<int64_t> rows = st.ok() ? ValidateAndNormalize(version.spec(), request.get()) : Result<int64_t>(st);
  if (!rows.ok()) {
    version.stats()->RecordFailure(FailureReason::kInvalid, 0);
    return callback(rows.status());
  }
  const bool asked_default = request->model_version.empty();
  request->model_version = version.version_string();
  auto pending = std::make_unique<PendingRequest>();
  pending->request = std::move(request);
  pending->callback = std::move(callback);
  pending->rows = *rows;
  pending->arrival = arrival;
  st = version.scheduler().Enqueue(pending);
  // A reload or an eviction may have retired this version between the
  // lookup and the enqueue; the request then goes to what serves now, once,
  // instead of failing (swaps lose no requests), or waits for the model to
  // load again (on demand).
  if (st.code() == StatusCode::kUnavailable && !shutting_down_.load()) {
    auto now = FindVersion(pending->request->model_name, asked_default ? "" : pending->request->model_version);
    if (!now.ok() && may_wait && CanWaitForLoad(now.status())) {
      if (asked_default) pending->request->model_version.clear();
      return WaitForLoad(std::move(pending->request), std::move(pending->callback), arrival);
    }
    Result<int64_t> again = now.ok() && now->get() != &version
                                ? ValidateAndNormalize((*now)->spec(), pending->request.get())
                                : Result<int64_t>(st);
    if (again.ok()) {
      pending->rows = *again;
      pending->request->model_version = (*now)->version_string();
      st = (*now)->scheduler().Enqueue(pending);
    }
  }
  if (!st.ok()) {
    version.stats()->RecordFailure(FailureReason::kRejected, 0);
    pending->callback(st);
  }
}

void InferenceServer::PollRepository() {
  if (shutting_down_.load()) return;
  auto names = repository_.ListModels();
  if (!names.ok()) {
    spdlog::warn("repository poll: {}", names.status().message());
    return;
  }
  std::set<std::string> present(names->begin(), names->end());
  std::vector<std::string> gone;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    for (const auto& [n, e] : models_)
      if (!present.count(n) && !e.versions.empty()) gone.push_back(n);
  }
  for (const auto& n : *names) {
    if (shutting_down_.load()) return;
    auto lock = model_locks_.Acquire(n);
    if (options_.residency == Residency::kOnDemand) {
      // Only resident models reload (when changed); the rest are re-indexed
      // and load fresh on their next request.
      bool resident = false;
      {
        std::shared_lock<std::shared_mutex> g(mu_);
        resident = ServingEntryLocked(n) != nullptr;
      }
      if (!resident && !IndexModelLocked(n)) continue;
    }
    // Errors are recorded on the entry.
    (void)LoadWithinBudgetLocked(n, std::nullopt, std::nullopt, /*retry_failed=*/false);
  }
  for (const auto& n : gone) {
    std::map<int64_t, std::shared_ptr<ModelVersion>> old;
    {
      auto lock = model_locks_.Acquire(n);
      std::unique_lock<std::shared_mutex> g(mu_);
      auto it = models_.find(n);
      if (it == models_.end()) continue;
      old.swap(it->second.versions);
      models_.erase(it);
    }
    spdlog::info("model '{}' left the repository: unloaded", n);
    ReleaseVersions(std::move(old));
  }
}

LabelsInfo InferenceServer::LabelsInfoLocked(const std::string& name, const ModelEntry& e) const {
  LabelsInfo info;
  info.model = name;
  if (const int64_t d = e.DefaultVersion()) info.default_version = std::to_string(d);
  for (const auto& [v, _] : e.versions) info.serving_versions.push_back(std::to_string(v));
  for (const auto& [l, v] : e.labels.labels) info.labels.emplace_back(l, std::to_string(v));
  for (int64_t v : e.labels.history) info.history.push_back(std::to_string(v));
  return info;
}

Status InferenceServer::NotServingError(const std::string& name) const {
  auto r = FindVersion(name, "");
  return r.ok() ? Status::Unavailable("model '" + name + "' is loading; retry") : r.status();
}

Result<LabelsInfo> InferenceServer::GetLabels(const std::string& name) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  if (const ModelEntry* e = ServingEntryLocked(name)) return LabelsInfoLocked(name, *e);
  g.unlock();
  return NotServingError(name);
}

Result<std::string> InferenceServer::ResolveLabel(const std::string& name, const std::string& label) const {
  std::shared_lock<std::shared_mutex> g(mu_);
  const ModelEntry* e = ServingEntryLocked(name);
  if (!e) {
    g.unlock();
    Status st = NotServingError(name);
    if (!CanWaitForLoad(st)) return st;
    // On demand: the labels as the repository has them; the request that
    // follows loads the model.
    INFERD_ASSIGN_OR_RETURN(VersionLabels labels, ReadVersionLabels(repository_.ModelDir(name)));
    auto v = labels.Find(label);
    if (!v) return Status::NotFound("model '" + name + "' has no label '" + label + "'");
    return std::to_string(*v);
  }
  auto v = e->labels.Find(label);
  if (!v) return Status::NotFound("model '" + name + "' has no label '" + label + "'");
  return std::to_string(*v);
}

Result<LabelsInfo> InferenceServer::SetLabel(const std::string& name, const std::string& label,
                                             const std::string& version) {
  INFERD_RETURN_IF_ERROR(ValidateLabelName(label));
  INFERD_ASSIGN_OR_RETURN(int64_t v, ParseVersion(version));
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  INFERD_RETURN_IF_ERROR(LoadIfOnDemandLocked(name));
  VersionLabels labels;
  bool serving = false;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    const ModelEntry* e = ServingEntryLocked(name);
    if (!e) {
      g.unlock();
      return NotServingError(name).WithPrefix("load the model before labelling its versions");
    }
    labels = e->labels;
    serving = e->versions.count(v) > 0;
  }
  labels.labels[label] = v;
  if (!serving) {
    // The version must exist in the repository; it loads (and warms up)
    // before the label moves. On failure nothing changes.
    INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_.ReadModel(name));
    if (!std::binary_search(src.available_versions.begin(), src.available_versions.end(), v))
      return Status::NotFound("model '" + name + "' has no version " + version + " in the repository");
    INFERD_RETURN_IF_ERROR(LoadWithinBudgetLocked(name, std::nullopt, labels, /*retry_failed=*/false));
  }
  std::unique_lock<std::shared_mutex> g(mu_);
  ModelEntry& e = models_[name];
  e.labels.labels[label] = v;
  INFERD_RETURN_IF_ERROR(SaveLabelsLocked(e, /*always=*/true));
  spdlog::info("model '{}': label '{}' -> version {}", name, label, v);
  return LabelsInfoLocked(name, e);
}

Result<LabelsInfo> InferenceServer::DeleteLabel(const std::string& name, const std::string& label) {
  auto lock = model_locks_.Acquire(name);
  INFERD_RETURN_IF_ERROR(LoadIfOnDemandLocked(name));
  std::unique_lock<std::shared_mutex> g(mu_);
  auto it = models_.find(name);
  if (!ServingEntryLocked(name)) {
    g.unlock();
    return NotServingError(name);
  }
  ModelEntry* e = &it->second;
  if (!e->labels.labels.erase(label)) return Status::NotFound("model '" + name + "' has no label '" + label + "'");
  INFERD_RETURN_IF_ERROR(SaveLabelsLocked(*e, /*always=*/true));
  return LabelsInfoLocked(name, *e);
}

Result<RollbackResult> InferenceServer::Rollback(const std::string& name) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  INFERD_RETURN_IF_ERROR(LoadIfOnDemandLocked(name));
  VersionLabels labels;
  int64_t from = 0;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    const ModelEntry* e = ServingEntryLocked(name);
    if (!e) {
      g.unlock();
      return NotServingError(name);
    }
    labels = e->labels;
    from = e->DefaultVersion();
  }
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_.ReadModel(name));
  auto target = labels.RollbackTarget(from, [&](int64_t v) {
    return std::binary_search(src.available_versions.begin(), src.available_versions.end(), v);
  });
  if (!target) {
    return Status::FailedPrecondition("model '" + name + "' has no earlier default version to roll back to from " +
                                      std::to_string(from));
  }
  labels.labels[kStableLabel] = *target;
  labels.TruncateAfter(*target);
  // Loads the target if it is not serving.
  INFERD_RETURN_IF_ERROR(LoadWithinBudgetLocked(name, std::nullopt, labels, /*retry_failed=*/false));
  RollbackResult r;
  r.model = name;
  r.from_version = std::to_string(from);
  r.to_version = std::to_string(*target);
  std::unique_lock<std::shared_mutex> g(mu_);
  ModelEntry& e = models_[name];
  INFERD_RETURN_IF_ERROR(SaveLabelsLocked(e, /*always=*/true));
  r.labels = LabelsInfoLocked(name, e);
  spdlog::info("model '{}': rolled back from version {} to {}", name, from, *target);
  return r;
}

}  // namespace inferd

#include "manager/model_manager.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "lifecycle/allocator.h"
#include "manager/load_plan.h"

namespace inferd {

namespace {
double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

int64_t ModelManager::Record::DefaultVersion() const {
  if (ready.empty()) return 0;
  if (auto stable = labels.Find(kStableLabel); stable && ready.count(*stable)) return *stable;
  if (!policy_versions.empty()) return *policy_versions.rbegin();
  return ready.rbegin()->first;
}

uint64_t ModelManager::Record::ResidentBytes() const {
  uint64_t b = 0;
  for (const auto& [v, s] : ready) b += s.version->resident_bytes();
  return b;
}

TimePoint ModelManager::Record::LastUsed() const {
  TimePoint t{};
  for (const auto& [v, s] : ready) t = std::max(t, s.version->last_used());
  return t;
}

bool ModelManager::Record::Busy() const {
  for (const auto& [v, s] : ready)
    if (s.version->busy()) return true;
  return false;
}

ModelManager::ModelManager(Options options, const ModelRepository* repository, const BackendRegistry* backends,
                           Clock* clock)
    : options_(std::move(options)), repository_(repository), backends_(backends), clock_(clock) {
  options_.version.clock = clock_;
  if (!options_.version.schedulers) options_.version.schedulers = &builtin_schedulers_;
  if (!options_.state) {
    memory_state_ = MakeMemoryStateStore();
    options_.state = memory_state_.get();
  }
  if (options_.residency == Residency::kOnDemand) {
    loader_ = std::make_unique<OnDemandLoader>(
        options_.model_load_threads, clock_, [this](const std::string& m) { return EnsureResident(m); },
        options_.on_load_done);
  }
}

ModelManager::~ModelManager() { Shutdown(); }

void ModelManager::Shutdown() {
  if (shutting_down_.exchange(true)) return;
  if (loader_) loader_->Stop();  // waiting requests are answered UNAVAILABLE
  model_locks_.AwaitIdle();      // loads in progress finish
  std::map<std::string, Record> models;
  {
    WriterLock g(&mu_);
    models.swap(models_);
  }
  for (auto& [name, r] : models)
    for (auto& [v, s] : r.ready) s.version->Drain();
}

Status ModelManager::Reconcile(const std::string& name, const Aspiration& want) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  if (!want.serve) return UnloadLocked(name);
  return LoadWithinBudgetLocked(name, want);
}

void ModelManager::RecordPlanFailureLocked(const std::string& name, const Status& st) {
  auto it = models_.find(name);
  if (it == models_.end()) {
    // A name the repository does not have leaves no entry behind.
    if (!repository_->HasModel(name)) return;
    it = models_.emplace(name, Record{}).first;
  }
  Record& r = it->second;
  r.status.reason = st.message();
  if (r.ready.empty()) r.status.state = ModelState::kFailed;
  r.plan_error = r.ready.empty() ? "" : st.message();
}

Status ModelManager::LoadLocked(const std::string& name, const Aspiration& want) {
  auto plan = PlanLoad(*repository_, *backends_, *options_.state, name, want.config_text, want.labels);
  if (!plan.ok()) {
    metrics_.load_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("model '{}' failed to load: {}", name, plan.status().message());
    WriterLock g(&mu_);
    RecordPlanFailureLocked(name, plan.status());
    return plan.status();
  }
  const ModelSource& src = plan->src;
  std::map<int64_t, ServingVersion> current;
  std::map<int64_t, FailedVersion> known_failed;
  {
    ReaderLock g(&mu_);
    if (auto it = models_.find(name); it != models_.end()) {
      current = it->second.ready;
      known_failed = it->second.failed;
    }
  }
  // Which versions keep serving as they are, which are known failures, which load.
  std::map<int64_t, ServingVersion> next;
  std::map<int64_t, FailedVersion> failed;
  std::map<int64_t, std::string> to_load;  // version -> fingerprint
  for (int64_t v : plan->wanted) {
    std::string fp = Fingerprint(src.config_text, repository_->fs(), repository_->VersionDir(name, v));
    if (auto it = current.find(v); it != current.end() && it->second.fingerprint == fp) {
      next[v] = it->second;  // unchanged snapshot: keeps serving as is
    } else if (auto f = known_failed.find(v);
               !want.retry_failed && f != known_failed.end() && f->second.fingerprint == fp) {
      failed[v] = f->second;  // same files as the failed attempt: not retried
    } else {
      to_load[v] = std::move(fp);
    }
  }
  if (!to_load.empty()) {
    WriterLock g(&mu_);
    Record& r = models_[name];
    for (const auto& [v, fp] : to_load) r.loading.insert(v);
  }
  // Load new and changed versions; nothing serving changes yet.
  Status first_error;  // of this attempt (versions skipped as known failures are not errors)
  for (auto& [v, fp] : to_load) {
    const TimePoint t0 = clock_->Now();
    const ModelVersion::Files files{&repository_->fs(), src.dir, repository_->VersionDir(name, v)};
    auto mv =
        ModelVersion::Load(*plan->backend, src.spec, v, files, src.config_text, plan->config_source, options_.version);
    const double secs = Seconds(clock_->Now() - t0);
    metrics_.load_seconds.Observe(secs);
    if (!mv.ok()) {
      metrics_.load_failures.fetch_add(1, std::memory_order_relaxed);
      failed[v] = {mv.status().message(), std::move(fp)};
      if (first_error.ok()) first_error = Status::Unavailable("version " + std::to_string(v) + ": " + failed[v].why);
      spdlog::error("model '{}' version {} failed to load after {:.3f} s: {}", name, v, secs, mv.status().message());
      continue;
    }
    const std::string note = (*mv)->load_note();
    spdlog::info("model '{}' version {} loaded and warmed up in {:.3f} s ({} backend{}{})", name, v, secs,
                 plan->backend->name(), note.empty() ? "" : "; ", note);
    next[v] = {std::move(*mv), std::move(fp), secs};
  }
  // A version that failed never replaces a serving one: keep every serving
  // version the new set does not have.
  if (!failed.empty()) {
    for (auto& [v, s] : current)
      if (!next.count(v)) next[v] = s;
  }
  Retired retired;
  {
    WriterLock g(&mu_);
    Record& r = models_[name];
    for (const auto& [v, fp] : to_load) r.loading.erase(v);
    if (!next.empty()) {
      bool changed = next.size() != r.ready.size();
      for (auto& [v, s] : r.ready) {
        auto it = next.find(v);
        if (it != next.end() && it->second.version == s.version) continue;
        changed = true;
        retired.emplace_back(v, s.version);
        r.unloading.insert(v);
      }
      if (changed) r.loaded_at = clock_->Now();
      r.ready = std::move(next);
      r.last_bytes = r.ResidentBytes();
      r.policy_versions.clear();
      for (int64_t v : plan->selected)
        if (r.ready.count(v)) r.policy_versions.insert(v);
    }
    // Labels requested by a caller (set label, rollback) apply only if their
    // versions loaded; labels read from the repository always apply.
    if (!want.labels || first_error.ok()) r.labels = std::move(plan->labels);
    r.traffic = plan->traffic;
    r.traffic_from_runtime = plan->traffic_from_runtime;
    r.dir = src.dir;
    r.plan_error.clear();
    r.backend = std::string(plan->backend->name());
    r.pinned = plan->pinned;
    std::string why;
    for (const auto& [v, f] : failed)
      why += (why.empty() ? "" : "; ") + ("version " + std::to_string(v) + ": " + f.why);
    r.failed = std::move(failed);
    r.status = {r.ready.empty() ? ModelState::kFailed : ModelState::kReady, std::move(why)};
    if (!r.ready.empty()) {
      Status st = SaveLabelsLocked(name, r, /*always=*/false);
      if (!st.ok()) spdlog::warn("cannot persist version labels: {}", st.message());
    }
    PublishLocked(name, r);
  }
  for (const auto& [v, mv] : retired) spdlog::info("model '{}' version {} retired: draining", name, v);
  DrainRetired(name, std::move(retired));  // in-flight requests on them complete first
  return first_error;
}

Status ModelManager::UnloadLocked(const std::string& name) {
  Retired retired;
  {
    WriterLock g(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      if (!repository_->HasModel(name)) return Status::NotFound("model '" + name + "' is not in the repository");
      return Status::OK();
    }
    Record& r = it->second;
    for (auto& [v, s] : r.ready) {
      retired.emplace_back(v, std::move(s.version));
      r.unloading.insert(v);
    }
    r.ready.clear();
    r.policy_versions.clear();
    r.failed.clear();
    r.status = {ModelState::kUnavailable, "unloaded"};
    PublishLocked(name, r);
  }
  const TimePoint t0 = clock_->Now();
  const size_t n = retired.size();
  DrainRetired(name, std::move(retired));
  spdlog::info("model '{}' unloaded ({} versions) in {:.3f} s", name, n, Seconds(clock_->Now() - t0));
  return Status::OK();
}

void ModelManager::Remove(const std::string& name) {
  auto lock = model_locks_.Acquire(name);
  Retired retired;
  {
    WriterLock g(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) return;
    for (auto& [v, s] : it->second.ready) retired.emplace_back(v, std::move(s.version));
    models_.erase(it);
  }
  spdlog::info("model '{}' left the repository: unloaded", name);
  DrainRetired(name, std::move(retired));
}

void ModelManager::PublishLocked(const std::string& name, Record& r) {
  if (r.ready.empty()) {
    r.serving = nullptr;
    return;
  }
  auto s = std::make_shared<ServingModel>();
  s->name = name;
  for (const auto& [v, sv] : r.ready) s->versions.emplace(v, sv.version);
  s->default_version = r.DefaultVersion();
  s->labels = r.labels;
  s->traffic = r.traffic;
  r.serving = std::move(s);
}

void ModelManager::DrainRetired(const std::string& name, Retired retired) {
  if (retired.empty()) return;
  const TimePoint t0 = clock_->Now();
  if (options_.on_drain_start) options_.on_drain_start(name);
  for (auto& [v, mv] : retired) mv->Drain();
  {
    WriterLock g(&mu_);
    if (auto it = models_.find(name); it != models_.end())
      for (auto& [v, mv] : retired) it->second.unloading.erase(v);
  }
  retired.clear();  // released here unless a request still holds one
  allocator::ReleaseFreeMemory();
  metrics_.unload_seconds.Observe(Seconds(clock_->Now() - t0));
}

Status ModelManager::SaveLabelsLocked(const std::string& name, Record& r, bool always) {
  const int64_t d = r.DefaultVersion();
  const bool changed = d != 0 && r.labels.RecordDefault(d);
  if (!always && !changed) return Status::OK();
  return SaveVersionLabels(*options_.state, name, r.labels);
}

std::shared_ptr<const ServingModel> ModelManager::Serving(const std::string& name) const {
  ReaderLock g(&mu_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second.serving;
}

Status ModelManager::NotServing(const std::string& name) const {
  std::string reason;
  {
    ReaderLock g(&mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      if (it->second.serving) return Status::Unavailable("model '" + name + "' is loading; retry");
      reason = it->second.status.reason.empty() ? "unloaded" : it->second.status.reason;
    }
  }
  // Known to the repository (not ready) or unknown. Checked outside the
  // lock; a directory test, no config parsing.
  if (!reason.empty() || repository_->HasModel(name)) {
    return Status::Unavailable("model '" + name + "' is not ready" + (reason.empty() ? "" : ": " + reason));
  }
  return Status::NotFound("Request for unknown model: '" + name + "' is not found");
}

StateInfo ModelManager::ModelStateOf(const std::string& name) const {
  ReaderLock g(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return {};
  return it->second.status;
}

bool ModelManager::AllServing() const {
  ReaderLock g(&mu_);
  for (const auto& [n, r] : models_)
    if (r.ready.empty()) return false;
  return true;
}

std::vector<std::shared_ptr<ModelVersion>> ModelManager::ServingVersions() const {
  std::vector<std::shared_ptr<ModelVersion>> out;
  ReaderLock g(&mu_);
  for (const auto& [n, r] : models_)
    for (const auto& [v, s] : r.ready) out.push_back(s.version);
  return out;
}

std::vector<std::string> ModelManager::ModelNames() const {
  std::vector<std::string> out;
  ReaderLock g(&mu_);
  for (const auto& [n, r] : models_) out.push_back(n);
  return out;
}

std::pair<size_t, size_t> ModelManager::ModelCounts() const {
  ReaderLock g(&mu_);
  size_t serving = 0;
  for (const auto& [n, r] : models_) serving += r.ready.empty() ? 0 : 1;
  return {models_.size(), serving};
}

const ModelManager::Record* ModelManager::ReadyRecordLocked(const std::string& name) const {
  auto it = models_.find(name);
  return it == models_.end() || it->second.ready.empty() ? nullptr : &it->second;
}

}  // namespace inferd

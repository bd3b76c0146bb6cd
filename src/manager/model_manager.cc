#include "manager/model_manager.h"

#include <spdlog/spdlog.h>

#include <cassert>
#include <filesystem>

#include "lifecycle/allocator.h"
#include "manager/load_plan.h"

namespace inferd {

namespace {
double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }
}  // namespace

bool ModelManager::Record::Serving() const {
  for (const auto& [v, e] : versions)
    if (e.ready()) return true;
  return false;
}

bool ModelManager::Record::IsReady(int64_t v) const {
  auto it = versions.find(v);
  return it != versions.end() && it->second.ready();
}

std::vector<int64_t> ModelManager::Record::ReadyNumbers() const {
  std::vector<int64_t> out;
  for (const auto& [v, e] : versions)
    if (e.ready()) out.push_back(v);
  return out;
}

int64_t ModelManager::Record::DefaultVersion() const {
  if (auto stable = labels.Find(kStableLabel); stable && IsReady(*stable)) return *stable;
  int64_t newest = 0, newest_policy = 0;
  for (const auto& [v, e] : versions) {
    if (!e.ready()) continue;
    newest = v;
    if (e.policy) newest_policy = v;
  }
  return newest_policy ? newest_policy : newest;
}

uint64_t ModelManager::Record::ResidentBytes() const {
  uint64_t b = 0;
  for (const auto& [v, e] : versions)
    if (e.ready()) b += e.version->resident_bytes();
  return b;
}

TimePoint ModelManager::Record::LastUsed() const {
  TimePoint t{};
  for (const auto& [v, e] : versions)
    if (e.ready()) t = std::max(t, e.version->last_used());
  return t;
}

bool ModelManager::Record::Busy() const {
  for (const auto& [v, e] : versions)
    if (e.ready() && e.version->busy()) return true;
  return false;
}

void ModelManager::MoveModelLocked(const std::string& name, Record& r, LifecycleEvent event,
                                   std::optional<std::string> reason) {
  auto next = ModelTransition(r.status.state, event);
  if (!next.ok()) {
    spdlog::error("model '{}': {} (a bug; the state stays)", name, next.status().message());
    return;
  }
  r.status.state = *next;
  if (reason) r.status.reason = std::move(*reason);
}

void ModelManager::MoveVersionLocked(const std::string& name, Record& r, int64_t version, LifecycleEvent event,
                                     std::optional<std::string> reason) {
  VersionEntry& e = r.versions[version];  // a new entry starts UNAVAILABLE
  auto next = VersionTransition(e.state.state, event);
  if (!next.ok()) {
    spdlog::error("model '{}' version {}: {} (a bug; the state stays)", name, version, next.status().message());
    if (e.state.state == ModelState::kUnavailable && e.draining == 0) r.versions.erase(version);
    return;
  }
  if (*next == ModelState::kUnavailable && e.draining == 0) {
    r.versions.erase(version);
    return;
  }
  e.state.state = *next;  // UNAVAILABLE with snapshots still draining: erased when the last one is done
  if (reason) e.state.reason = std::move(*reason);
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
    for (auto& [v, e] : r.versions)
      if (e.ready()) e.version->Drain();
}

Status ModelManager::Reconcile(const std::string& name, const Aspiration& want) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  if (!want.serve) return UnloadLocked(lock, name);
  return LoadWithinBudgetLocked(lock, name, want);
}

void ModelManager::RecordPlanFailureLocked(const std::string& name, const Status& st) {
  auto it = models_.find(name);
  if (it == models_.end()) {
    // A name the repository does not have leaves no entry behind.
    if (!repository_->HasModel(name)) return;
    it = models_.emplace(name, Record{}).first;
  }
  Record& r = it->second;
  // A serving model keeps serving (READY, the error as its reason and on its
  // versions' index entries); one that serves nothing is FAILED.
  MoveModelLocked(name, r, LifecycleEvent::kLoadFailed, st.message());
  r.plan_error = r.Serving() ? st.message() : "";
}

Status ModelManager::LoadLocked(const KeyedMutex::Lock& held, const std::string& name, const Aspiration& want) {
  assert(held.Holds(model_locks_, name));
  auto plan = PlanLoad(*repository_, *backends_, *options_.state, name, want.config_text, want.labels);
  if (!plan.ok()) {
    metrics_.load_failures.fetch_add(1, std::memory_order_relaxed);
    spdlog::error("model '{}' failed to load: {}", name, plan.status().message());
    WriterLock g(&mu_);
    RecordPlanFailureLocked(name, plan.status());
    return plan.status();
  }
  const ModelSource& src = plan->src;
  // What serves now, and the failures of earlier attempts.
  struct Serving {
    std::shared_ptr<ModelVersion> version;
    std::string fingerprint;
    double load_seconds = 0;
  };
  struct Failure {
    std::string why;
    std::string fingerprint;
  };
  std::map<int64_t, Serving> current;
  std::map<int64_t, Failure> known_failed;
  {
    ReaderLock g(&mu_);
    if (auto it = models_.find(name); it != models_.end()) {
      for (const auto& [v, e] : it->second.versions) {
        if (e.ready()) current[v] = {e.version, e.fingerprint, e.load_seconds};
        if (!e.failed_fingerprint.empty()) known_failed[v] = {e.failed_why, e.failed_fingerprint};
      }
    }
  }
  // Which versions keep serving as they are, which are known failures, which load.
  std::map<int64_t, Serving> next;
  std::map<int64_t, Failure> failed;
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
  {
    WriterLock g(&mu_);
    Record& r = models_[name];
    MoveModelLocked(name, r, LifecycleEvent::kLoadStarted);
    for (const auto& [v, fp] : to_load) MoveVersionLocked(name, r, v, LifecycleEvent::kLoadStarted);
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
    const std::set<int64_t> selected(plan->selected.begin(), plan->selected.end());
    bool changed = false;
    // Loads of this attempt: swapped in, or failed (a serving snapshot of the
    // same number keeps serving then).
    for (const auto& [v, fp] : to_load) {
      if (auto f = failed.find(v); f != failed.end()) {
        MoveVersionLocked(name, r, v, LifecycleEvent::kLoadFailed, f->second.why);
        continue;
      }
      VersionEntry& e = r.versions[v];
      if (e.ready() && e.version) {  // a reload: the replaced snapshot drains
        retired.emplace_back(v, e.version);
        ++e.draining;
      }
      MoveVersionLocked(name, r, v, LifecycleEvent::kLoadSucceeded, "");
      const Serving& s = next[v];
      e.version = s.version;
      e.fingerprint = s.fingerprint;
      e.load_seconds = s.load_seconds;
      changed = true;
    }
    for (auto it = r.versions.begin(); it != r.versions.end();) {
      const int64_t v = it->first;
      VersionEntry& e = (it++)->second;  // advanced first: a move may erase the entry
      // Failures: this attempt's and the known ones it skipped; the others are forgotten.
      if (auto f = failed.find(v); f != failed.end()) {
        e.failed_why = f->second.why;
        e.failed_fingerprint = f->second.fingerprint;
      } else {
        e.failed_why.clear();
        e.failed_fingerprint.clear();
        if (e.state.state == ModelState::kFailed) {
          MoveVersionLocked(name, r, v, LifecycleEvent::kUnloadStarted);  // no longer wanted: gone
          continue;
        }
      }
      if (!e.ready()) continue;
      // A serving version the new set does not keep retires and drains.
      if (!next.count(v)) {
        retired.emplace_back(v, std::move(e.version));
        ++e.draining;
        e.policy = false;
        changed = true;
        MoveVersionLocked(name, r, v, LifecycleEvent::kUnloadStarted, "");
        continue;
      }
      e.policy = selected.count(v) > 0;
    }
    if (changed) r.loaded_at = clock_->Now();
    if (r.Serving()) r.last_bytes = r.ResidentBytes();
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
    MoveModelLocked(name, r, r.Serving() ? LifecycleEvent::kLoadSucceeded : LifecycleEvent::kLoadFailed,
                    std::move(why));
    if (r.Serving()) {
      Status st = SaveLabelsLocked(name, r, /*always=*/false);
      if (!st.ok()) spdlog::warn("cannot persist version labels: {}", st.message());
    }
    PublishLocked(name, r);
  }
  for (const auto& [v, mv] : retired) spdlog::info("model '{}' version {} retired: draining", name, v);
  DrainRetired(name, std::move(retired));  // in-flight requests on them complete first
  return first_error;
}

Status ModelManager::UnloadLocked(const KeyedMutex::Lock& held, const std::string& name) {
  assert(held.Holds(model_locks_, name));
  Retired retired;
  {
    WriterLock g(&mu_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      if (!repository_->HasModel(name)) return Status::NotFound("model '" + name + "' is not in the repository");
      return Status::OK();
    }
    Record& r = it->second;
    for (auto v_it = r.versions.begin(); v_it != r.versions.end();) {
      const int64_t v = v_it->first;
      VersionEntry& e = (v_it++)->second;  // advanced first: a move may erase the entry
      e.failed_why.clear();
      e.failed_fingerprint.clear();
      e.policy = false;
      if (e.ready()) {
        retired.emplace_back(v, std::move(e.version));
        ++e.draining;
      }
      if (e.state.state != ModelState::kUnloading && e.state.state != ModelState::kUnavailable)
        MoveVersionLocked(name, r, v, LifecycleEvent::kUnloadStarted, "");
    }
    // READY -> UNLOADING until its versions drained; a model that served
    // nothing is UNAVAILABLE at once.
    MoveModelLocked(name, r, LifecycleEvent::kUnloadStarted, "unloaded");
    PublishLocked(name, r);
  }
  const TimePoint t0 = clock_->Now();
  const size_t n = retired.size();
  DrainRetired(name, std::move(retired));
  {
    WriterLock g(&mu_);
    if (auto it = models_.find(name); it != models_.end() && it->second.status.state == ModelState::kUnloading)
      MoveModelLocked(name, it->second, LifecycleEvent::kDrained, "unloaded");
  }
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
    for (auto& [v, e] : it->second.versions)
      if (e.ready()) retired.emplace_back(v, std::move(e.version));
    models_.erase(it);  // forgotten: its snapshots drain without a record to tell
  }
  spdlog::info("model '{}' left the repository: unloaded", name);
  DrainRetired(name, std::move(retired));
}

void ModelManager::PublishLocked(const std::string& name, Record& r) {
  if (!r.Serving()) {
    r.serving = nullptr;
    return;
  }
  auto s = std::make_shared<ServingModel>();
  s->name = name;
  for (const auto& [v, e] : r.versions)
    if (e.ready()) s->versions.emplace(v, e.version);
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
    if (auto it = models_.find(name); it != models_.end()) {
      Record& r = it->second;
      for (auto& [v, mv] : retired) {
        auto e = r.versions.find(v);
        if (e == r.versions.end() || e->second.draining == 0) continue;
        if (--e->second.draining > 0) continue;
        if (e->second.state.state == ModelState::kUnavailable)
          r.versions.erase(e);  // forgotten (unloaded after a failure) while it drained
        else
          MoveVersionLocked(name, r, v, LifecycleEvent::kDrained);
      }
    }
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
    if (!r.Serving()) return false;
  return true;
}

std::vector<std::shared_ptr<ModelVersion>> ModelManager::ServingVersions() const {
  std::vector<std::shared_ptr<ModelVersion>> out;
  ReaderLock g(&mu_);
  for (const auto& [n, r] : models_)
    for (const auto& [v, e] : r.versions)
      if (e.ready()) out.push_back(e.version);
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
  for (const auto& [n, r] : models_) serving += r.Serving() ? 1 : 0;
  return {models_.size(), serving};
}

std::map<ModelState, size_t> ModelManager::CountByState() const {
  std::map<ModelState, size_t> out;
  for (ModelState st : kAllModelStates) out[st] = 0;
  ReaderLock g(&mu_);
  for (const auto& [n, r] : models_) ++out[r.status.state];
  return out;
}

const ModelManager::Record* ModelManager::ReadyRecordLocked(const std::string& name) const {
  auto it = models_.find(name);
  return it == models_.end() || !it->second.Serving() ? nullptr : &it->second;
}

}  // namespace inferd

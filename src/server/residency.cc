// InferenceServer's on-demand residency: the start-up index, loads for
// waiting requests, the memory budget and LRU eviction (the choice itself is
// lifecycle/residency_policy.h), and the model listing.
#include <spdlog/spdlog.h>

#include <charconv>
#include <filesystem>

#include "lifecycle/byte_size.h"
#include "lifecycle/residency_policy.h"
#include "server/inference_server.h"

namespace inferd {
namespace {

constexpr const char* kNotResident = "not resident (on demand: loads on its first request)";

// Size on disk of the model's largest version folder: the estimate for a
// model that was never loaded.
uint64_t LargestVersionBytes(const std::string& model_dir) {
  uint64_t best = 0;
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(model_dir, ec)) {
    const std::string n = d.path().filename().string();
    int64_t v = 0;
    auto [p, e] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (e != std::errc() || p != n.data() + n.size() || !d.is_directory(ec)) continue;
    best = std::max(best, DirectoryBytes(d.path().string()));
  }
  return best;
}

}  // namespace

bool InferenceServer::IndexModelLocked(const std::string& name) {
  auto src = repository_.ReadModel(name);
  std::unique_lock<std::shared_mutex> g(mu_);
  ModelEntry& e = models_[name];
  if (!e.versions.empty()) return false;
  if (!src.ok()) {
    e.reason = src.status().message();
    e.load_failed = true;
    return false;
  }
  e.dir = src->dir;
  auto pinned = PinnedParameter(src->spec);
  e.pinned = pinned.ok() && *pinned;
  if (!pinned.ok()) {
    e.reason = src->config_path + ": " + pinned.status().message();
    e.load_failed = true;
  } else if (!e.load_failed) {
    e.reason = e.reason.rfind("evicted", 0) == 0 ? e.reason : kNotResident;
  }
  return e.pinned;
}

Status InferenceServer::EnsureResident(const std::string& name) {
  auto lock = model_locks_.Acquire(name);
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  return LoadIfOnDemandLocked(name);
}

Status InferenceServer::LoadIfOnDemandLocked(const std::string& name) {
  if (!loader_) return Status::OK();
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    if (ServingEntryLocked(name)) return Status::OK();
  }
  if (!repository_.HasModel(name)) return Status::OK();  // the caller reports NOT_FOUND
  Status st = LoadWithinBudgetLocked(name, std::nullopt, std::nullopt, /*retry_failed=*/false);
  return st.ok() ? st : st.WithPrefix("model '" + name + "' could not be loaded");
}

uint64_t InferenceServer::EstimateBytes(const std::string& name) const {
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      if (!it->second.versions.empty()) return 0;  // a reload: sized after it
      if (it->second.last_bytes > 0) return it->second.last_bytes;
    }
  }
  return LargestVersionBytes(repository_.ModelDir(name));
}

Status InferenceServer::LoadWithinBudgetLocked(const std::string& name, const std::optional<std::string>& config_text,
                                               const std::optional<VersionLabels>& labels_override, bool retry_failed) {
  if (!BudgetActive()) return LoadModelLocked(name, config_text, labels_override, retry_failed);
  const uint64_t incoming = EstimateBytes(name);
  {
    std::lock_guard<std::mutex> room(room_mu_);
    MakeRoomLocked(name, incoming);
    reserved_bytes_ += incoming;
  }
  Status st = LoadModelLocked(name, config_text, labels_override, retry_failed);
  std::lock_guard<std::mutex> room(room_mu_);
  reserved_bytes_ -= incoming;
  const uint64_t used = MakeRoomLocked(name, 0);  // the measured size may exceed the estimate
  if (used > options_.memory_budget_bytes) {
    lifecycle_.over_budget_loads.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn(
        "memory budget exceeded after loading '{}': {} in use of {} (the rest is pinned, busy or "
        "resident for less than the minimum residency)",
        name, FormatBytes(used), FormatBytes(options_.memory_budget_bytes));
  }
  return st;
}

uint64_t InferenceServer::MakeRoomLocked(const std::string& keep, uint64_t incoming) {
  std::vector<ResidentModel> candidates;
  uint64_t used = reserved_bytes_;
  {
    std::shared_lock<std::shared_mutex> g(mu_);
    for (const auto& [n, e] : models_) {
      if (e.versions.empty()) continue;
      const uint64_t bytes = e.ResidentBytes();
      used += bytes;
      if (n != keep) candidates.push_back({n, bytes, e.LastUsed(), e.loaded_at, e.pinned, e.Busy()});
    }
  }
  const EvictionPlan plan = PlanEvictions(std::move(candidates), options_.memory_budget_bytes, used, incoming,
                                          clock_->Now(), options_.min_residency);
  for (const auto& victim : plan.victims) used -= Evict(victim);
  return used + incoming;
}

uint64_t InferenceServer::Evict(const std::string& name) {
  auto lock = model_locks_.TryAcquire(name);
  if (!lock.owns()) return 0;  // loading, reloading or relabelling
  std::map<int64_t, std::shared_ptr<ModelVersion>> old;
  TimePoint loaded_at;
  uint64_t bytes = 0;
  {
    std::unique_lock<std::shared_mutex> g(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || it->second.versions.empty() || it->second.Busy() || it->second.pinned) return 0;
    ModelEntry& e = it->second;
    bytes = e.ResidentBytes();
    old.swap(e.versions);
    e.fingerprints.clear();
    e.policy_versions.clear();
    e.reason = "evicted to stay within the memory budget (on demand: loads again on its next request)";
    loaded_at = e.loaded_at;
  }
  const double age = std::chrono::duration<double>(clock_->Now() - loaded_at).count();
  lifecycle_.evictions.fetch_add(1, std::memory_order_relaxed);
  lifecycle_.eviction_age_seconds.Observe(age);
  spdlog::debug("evicted model '{}' ({}, resident {:.1f} s)", name, FormatBytes(bytes), age);
  ReleaseVersions(std::move(old));  // a request that raced the eviction waits for a reload
  return bytes;
}

ModelListing InferenceServer::ListModels() const {
  ModelListing out;
  out.residency = options_.residency == Residency::kOnDemand ? "on-demand" : "eager";
  out.budget_bytes = options_.memory_budget_bytes;
  auto names = repository_.ListModels();
  std::set<std::string> all;
  if (names.ok()) all.insert(names->begin(), names->end());
  const TimePoint now = clock_->Now();
  std::shared_lock<std::shared_mutex> g(mu_);
  for (const auto& [n, e] : models_) all.insert(n);
  for (const auto& n : all) {
    ModelListing::Model m;
    m.name = n;
    m.state = "UNAVAILABLE";
    m.reason = "unloaded";
    auto it = models_.find(n);
    if (it != models_.end()) {
      const ModelEntry& e = it->second;
      m.reason = e.reason;
      m.pinned = e.pinned;
      if (!e.versions.empty()) {
        m.state = "READY";
        m.default_version = std::to_string(e.DefaultVersion());
        m.resident_bytes = e.ResidentBytes();
        m.idle_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - e.LastUsed()).count();
        out.used_bytes += m.resident_bytes;
      }
      for (const auto& [v, mv] : e.versions)
        m.versions.push_back({std::to_string(v), "READY", "", mv->resident_bytes(), mv->size_source()});
      for (const auto& [v, f] : e.failed)
        if (!e.versions.count(v)) m.versions.push_back({std::to_string(v), "UNAVAILABLE", f.why, 0, ""});
      std::sort(m.versions.begin(), m.versions.end(), [](const auto& a, const auto& b) {
        return std::make_pair(a.version.size(), a.version) < std::make_pair(b.version.size(), b.version);
      });
      for (const auto& [l, v] : e.labels.labels) m.labels.emplace_back(l, std::to_string(v));
    }
    if (m.state != "READY" && loader_ && loader_->IsPending(n)) m.state = "LOADING";
    out.models.push_back(std::move(m));
  }
  return out;
}

}  // namespace inferd

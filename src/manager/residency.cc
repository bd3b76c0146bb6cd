// ModelManager's on-demand residency: the start-up index, loads for waiting
// requests, the memory budget and LRU eviction (the choice itself is
// lifecycle/residency_policy.h). Evicted models are chosen and detached under
// the budget lock, and drained after it is released, so one model's drain
// never holds up another model's load.
#include <spdlog/spdlog.h>

#include <cassert>
#include <charconv>
#include <filesystem>

#include "core/byte_size.h"
#include "lifecycle/residency_policy.h"
#include "manager/model_manager.h"

namespace inferd {
namespace {

constexpr const char* kNotResident = "not resident (on demand: loads on its first request)";
constexpr const char* kEvicted =
    "evicted to stay within the memory budget (on demand: loads again on its next request)";

// Size on disk of the model's largest version folder: the estimate for a
// model that was never loaded.
uint64_t LargestVersionBytes(const Filesystem& fs, const std::string& model_dir) {
  uint64_t best = 0;
  auto entries = fs.List(model_dir);
  if (!entries.ok()) return 0;
  for (const auto& d : *entries) {
    const std::string& n = d.name;
    int64_t v = 0;
    auto [p, e] = std::from_chars(n.data(), n.data() + n.size(), v);
    if (e != std::errc() || p != n.data() + n.size() || !d.directory) continue;
    best = std::max(best, TotalBytes(fs, JoinPath(model_dir, n)));
  }
  return best;
}

}  // namespace

bool ModelManager::Index(const std::string& name) {
  auto lock = model_locks_.Acquire(name);
  auto src = repository_->ReadModel(name);
  WriterLock g(&mu_);
  Record& r = models_[name];
  if (r.Serving()) return false;
  if (!src.ok()) {
    MoveModelLocked(name, r, LifecycleEvent::kLoadFailed, src.status().message());
    return false;
  }
  r.dir = src->dir;
  auto pinned = PinnedParameter(src->spec);
  r.pinned = pinned.ok() && *pinned;
  if (!pinned.ok()) {
    MoveModelLocked(name, r, LifecycleEvent::kLoadFailed, src->config_path + ": " + pinned.status().message());
  } else if (r.status.state == ModelState::kUnavailable) {
    MoveModelLocked(name, r, LifecycleEvent::kIndexed, kNotResident);
  }
  return r.pinned;
}

bool ModelManager::LoadPending(const std::string& name) const { return loader_ && loader_->IsPending(name); }

Status ModelManager::EnsureResident(const std::string& name) {
  auto lock = model_locks_.Acquire(name);
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  return EnsureResidentLocked(lock, name);
}

Status ModelManager::EnsureResidentLocked(const KeyedMutex::Lock& held, const std::string& name) {
  assert(held.Holds(model_locks_, name));
  if (!loader_) return Status::OK();
  {
    ReaderLock g(&mu_);
    if (ReadyRecordLocked(name)) return Status::OK();
  }
  if (!repository_->HasModel(name)) return Status::OK();  // the caller reports NOT_FOUND
  Aspiration want;
  want.retry_failed = false;
  Status st = LoadWithinBudgetLocked(held, name, want);
  return st.ok() ? st : st.WithPrefix("model '" + name + "' could not be loaded");
}

void ModelManager::LoadInBackground(const std::string& name, std::optional<OnDemandLoader::Waiter> waiter) {
  if (waiter) metrics_.cold_starts.fetch_add(1, std::memory_order_relaxed);
  loader_->Enqueue(name, std::move(waiter));
}

uint64_t ModelManager::EstimateBytes(const std::string& name) const {
  {
    ReaderLock g(&mu_);
    auto it = models_.find(name);
    if (it != models_.end()) {
      if (it->second.Serving()) return 0;  // a reload: sized after it
      if (it->second.last_bytes > 0) return it->second.last_bytes;
    }
  }
  return LargestVersionBytes(repository_->fs(), repository_->ModelDir(name));
}

Status ModelManager::LoadWithinBudgetLocked(const KeyedMutex::Lock& held, const std::string& name,
                                            const Aspiration& want) {
  assert(held.Holds(model_locks_, name));
  if (!BudgetActive()) return LoadLocked(held, name, want);
  const uint64_t incoming = EstimateBytes(name);
  std::vector<std::pair<std::string, Retired>> evicted;
  {
    MutexLock room(&room_mu_);
    MakeRoomLocked(name, incoming, &evicted);
    reserved_bytes_ += incoming;
  }
  DrainEvicted(std::move(evicted));
  Status st = LoadLocked(held, name, want);
  uint64_t used = 0;
  {
    MutexLock room(&room_mu_);
    reserved_bytes_ -= incoming;
    used = MakeRoomLocked(name, 0, &evicted);  // the measured size may exceed the estimate
  }
  DrainEvicted(std::move(evicted));
  if (used > options_.memory_budget_bytes) {
    metrics_.over_budget_loads.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn(
        "memory budget exceeded after loading '{}': {} in use of {} (the rest is pinned, busy or "
        "resident for less than the minimum residency)",
        name, FormatBytes(used), FormatBytes(options_.memory_budget_bytes));
  }
  return st;
}

uint64_t ModelManager::MakeRoomLocked(const std::string& keep, uint64_t incoming,
                                      std::vector<std::pair<std::string, Retired>>* out) {
  std::vector<ResidentModel> candidates;
  uint64_t used = reserved_bytes_;
  {
    ReaderLock g(&mu_);
    for (const auto& [n, r] : models_) {
      if (!r.Serving()) continue;
      const uint64_t bytes = r.ResidentBytes();
      used += bytes;
      // Busy: requests in its queue, or waiters of its load on their way there.
      const bool busy = r.Busy() || (loader_ && loader_->IsInUse(n));
      if (n != keep) {
        const bool elsewhere = options_.copies_elsewhere && options_.copies_elsewhere(n);
        candidates.push_back({n, bytes, r.LastUsed(), r.loaded_at, r.pinned, busy, elsewhere});
      }
    }
  }
  const EvictionPlan plan = PlanEvictions(std::move(candidates), options_.memory_budget_bytes, used, incoming,
                                          clock_->Now(), options_.min_residency);
  for (const auto& victim : plan.victims) {
    Retired retired;
    used -= DetachForEviction(victim, &retired);
    if (!retired.empty()) out->emplace_back(victim, std::move(retired));
  }
  return used + incoming;
}

uint64_t ModelManager::DetachForEviction(const std::string& name, Retired* out) {
  auto lock = model_locks_.TryAcquire(name);
  if (!lock.owns()) return 0;                       // loading, reloading or relabelling
  if (loader_ && loader_->IsInUse(name)) return 0;  // requests that waited for its load are on their way
  TimePoint loaded_at;
  uint64_t bytes = 0;
  {
    WriterLock g(&mu_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.Serving() || it->second.Busy() || it->second.pinned) return 0;
    Record& r = it->second;
    bytes = r.ResidentBytes();
    for (auto& [v, e] : r.versions) {
      if (!e.ready()) continue;
      out->emplace_back(v, std::move(e.version));
      ++e.draining;
      e.policy = false;
      MoveVersionLocked(name, r, v, LifecycleEvent::kEvictStarted, "");
    }
    MoveModelLocked(name, r, LifecycleEvent::kEvictStarted, kEvicted);
    loaded_at = r.loaded_at;
    PublishLocked(name, r);
  }
  const double age = std::chrono::duration<double>(clock_->Now() - loaded_at).count();
  metrics_.evictions.fetch_add(1, std::memory_order_relaxed);
  metrics_.eviction_age_seconds.Observe(age);
  spdlog::info("model '{}' evicted ({}, resident {:.1f} s)", name, FormatBytes(bytes), age);
  return bytes;
}

bool ModelManager::Evict(const std::string& name) {
  if (!loader_) return false;
  Retired retired;
  (void)DetachForEviction(name, &retired);
  const bool evicted = Serving(name) == nullptr;
  if (!retired.empty()) DrainRetired(name, std::move(retired));
  return evicted;
}

void ModelManager::DrainEvicted(std::vector<std::pair<std::string, Retired>> evicted) {
  // A request that raced the eviction waits for a reload.
  for (auto& [name, retired] : evicted) DrainRetired(name, std::move(retired));
}

}  // namespace inferd

// ModelManager: owns every model the server knows, its versions and their
// lifecycle state. Sources say which models should serve -- the repository
// scan and poll (RepositorySource), explicit load/unload calls, label changes
// and rollback, on-demand residency -- and the manager reconciles: it works
// out the versions to serve (those the version_policy selects plus those a
// label points at), loads and warms up new or changed ones, swaps them in,
// and drains and unloads the ones no longer wanted.
//
// Guarantees (kept from the first lifecycle work, tested in
// model_manager_test.cc):
//  1. A version whose config and files are unchanged keeps serving untouched
//     across reloads (snapshots are immutable).
//  2. A version that fails to load never replaces a serving one; its error is
//     recorded (state FAILED, reason) and shown in the index and listing.
//  3. A retired version takes no new requests and finishes every accepted
//     one before it is released.
//  4. Labels a caller asks for apply only if every version they need loaded.
//  5. Under on-demand residency with a memory budget, idle models are
//     evicted least-recently-used first (lifecycle/residency_policy.h);
//     pinned, busy and recently loaded models never are.
//
// Thread-safety: thread-safe. Work on one model (load, unload, labels,
// eviction) is serialized by a per-model lock; different models load in
// parallel. Serving() -- the request path -- takes only a shared lock for a
// pointer copy and never waits for a load. Model code never runs under a
// manager lock; versions are drained outside every manager lock except the
// model's own.
//
// Ownership: the repository, backend registry and clock are not owned and
// must outlive the manager.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/keyed_mutex.h"
#include "core/mutex.h"
#include "lifecycle/control_state_store.h"
#include "lifecycle/version_labels.h"
#include "manager/model_state.h"
#include "manager/model_version.h"
#include "manager/model_views.h"
#include "manager/on_demand_loader.h"
#include "manager/serving_model.h"
#include "metrics/histogram.h"
#include "repository/repository.h"

namespace inferd {

// kEager: models load when a source says (start-up, poll, load calls).
// kOnDemand: every repository model is indexed at start-up and loads on its
// first request; a memory budget evicts idle ones (LRU).
enum class Residency { kEager, kOnDemand };

// What a source asks of one model.
struct Aspiration {
  // false: nothing of the model should serve (explicit unload).
  bool serve = true;
  // Replaces config.pbtxt (a load call with a config).
  std::optional<std::string> config_text;
  // Labels to serve with (label changes, rollback): the versions they point
  // at are loaded too, and they take effect only if every version loaded.
  // Without them the labels persisted for the model apply.
  std::optional<VersionLabels> labels;
  // Also retry versions that failed before with unchanged files (explicit
  // loads do; polls, label changes and on-demand loads do not).
  bool retry_failed = true;
};

// Lifecycle metrics (Prometheus: server/metrics_exporter.cc).
struct LifecycleMetrics {
  Histogram load_seconds{Histogram::LoadSecondsBuckets()};
  Histogram unload_seconds{Histogram::LoadSecondsBuckets()};
  Histogram eviction_age_seconds{Histogram::AgeSecondsBuckets()};
  std::atomic<uint64_t> load_failures{0}, cold_starts{0}, evictions{0}, over_budget_loads{0};
  std::atomic<uint64_t> cold_start_timeouts{0};
};

class ModelManager {
 public:
  struct Options {
    Residency residency = Residency::kEager;
    // kOnDemand: bytes all resident models may hold (0 = no budget).
    uint64_t memory_budget_bytes = 0;
    // kOnDemand: a model is not evicted before it has been resident this long.
    Duration min_residency = std::chrono::seconds(1);
    // kOnDemand: threads loading models for waiting requests.
    int model_load_threads = 2;
    // kOnDemand: called once per request that waited for a load (see
    // OnDemandLoader): with OK once its model serves, else with the error.
    OnDemandLoader::DoneFn on_load_done;
    // Where labels persist (not owned; null = in memory only).
    ControlStateStore* state = nullptr;
    // Called (no lock held, on the reconciling thread) when retired versions
    // of a model start draining: the snapshot without them is already
    // published. Tests wait on it for "the swap happened"; may be null.
    std::function<void(const std::string& model)> on_drain_start;
    // kOnDemand, cluster mode: whether another node holds a copy of `model`
    // (such models are evicted first); null = none. Called under the
    // manager's locks: must not call back into the manager.
    std::function<bool(const std::string& model)> copies_elsewhere;
    // version.clock is set from the clock argument; version.schedulers, when
    // null, to the manager's own factory with the built-in kinds.
    ModelVersion::Options version;
  };

  ModelManager(Options options, const ModelRepository* repository, const BackendRegistry* backends, Clock* clock);
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // ---- Sources ----

  // Brings `name` to what `want` says: loads (or reloads) it as a set of
  // version snapshots, or unloads it. Errors are also recorded on the model
  // (state and reason). Blocks for the load; never call it on an I/O thread.
  Status Reconcile(const std::string& name, const Aspiration& want);
  // The model left the repository: unloaded and forgotten.
  void Remove(const std::string& name);
  // On-demand residency: records a repository model that is not loaded
  // (state UNAVAILABLE, "not resident"). Returns whether it is pinned (such
  // models load at start-up). A resident model is left alone (false).
  bool Index(const std::string& name);
  // On-demand residency: loads `name` if it is a repository model that does
  // not serve (for waiting requests, labels and rollback).
  Status EnsureResident(const std::string& name);
  // On-demand residency: queues a load of `name` for `waiter` (if any); the
  // waiter is answered through Options::on_load_done.
  void LoadInBackground(const std::string& name, std::optional<OnDemandLoader::Waiter> waiter);
  bool on_demand() const { return loader_ != nullptr; }
  // On-demand residency: a load of `name` is queued or running.
  bool LoadPending(const std::string& name) const;
  // On-demand residency: evicts `name` now if it is idle (no request queued
  // or running, not pinned, not loading or reloading); whether it no longer
  // serves. Cluster mode drops a copy the placement released this way.
  bool Evict(const std::string& name);

  // ---- Labels and rollback (manager/labels.cc) ----

  Result<LabelsInfo> GetLabels(const std::string& name) const;
  // The version `label` points at (on demand also for a model not resident).
  Result<int64_t> ResolveLabel(const std::string& name, const std::string& label) const;
  // Points `label` at `version`, loading it first if it does not serve.
  Result<LabelsInfo> SetLabel(const std::string& name, const std::string& label, int64_t version);
  // Removes `label`; a version nothing wants any more (no label, version_policy
  // or traffic share) then unloads, as a rolled-back canary does.
  Result<LabelsInfo> DeleteLabel(const std::string& name, const std::string& label);
  // Makes the previous default version the default again (`stable`).
  Result<RollbackResult> Rollback(const std::string& name);

  // ---- Traffic policies (manager/traffic.cc) ----

  // The model's traffic policy and where it comes from ("runtime", "config", "none").
  Result<TrafficInfo> GetTraffic(const std::string& name) const;
  // Sets the run-time policy (persisted; survives restarts; takes precedence
  // over the config's). Every target must be a label of the model or one of
  // its versions in the repository (INVALID_ARGUMENT otherwise; nothing changes).
  Result<TrafficInfo> SetTraffic(const std::string& name, TrafficPolicy policy);
  // Drops the run-time policy: the config's applies again.
  Result<TrafficInfo> ClearTraffic(const std::string& name);

  // ---- Reads ----

  // What `name` serves now, or null. The request path: one shared lock and
  // a pointer copy.
  std::shared_ptr<const ServingModel> Serving(const std::string& name) const;
  // Why `name` serves nothing: UNAVAILABLE (a repository model, with its
  // state's reason) or NOT_FOUND (unknown).
  Status NotServing(const std::string& name) const;
  // The state of a model that serves nothing (UNAVAILABLE for unknown names).
  StateInfo ModelStateOf(const std::string& name) const;
  // Whether every model the manager knows serves something.
  bool AllServing() const;
  // Every serving version of every model, for statistics and metrics.
  std::vector<std::shared_ptr<ModelVersion>> ServingVersions() const;
  // Every model the manager knows (serving or not), sorted.
  std::vector<std::string> ModelNames() const;
  // Models known / models serving, for metrics.
  std::pair<size_t, size_t> ModelCounts() const;
  // Models by their stored state (every state, zeros included), for metrics.
  std::map<ModelState, size_t> CountByState() const;
  // GET /v2/repository/index: repository models and every model known.
  Result<std::vector<RepositoryIndexEntry>> RepositoryIndex(bool ready_only) const;
  // GET /v2/repository/models (manager/listing.cc).
  ModelListing ListModels() const;
  const LifecycleMetrics& metrics() const { return metrics_; }
  LifecycleMetrics& mutable_metrics() { return metrics_; }

  // Stops background loads (waiters answered UNAVAILABLE), waits for loads
  // in progress, then drains and releases every model. Idempotent.
  void Shutdown();

 private:
  // One version of a model, by number: its stored state (manager/model_state.h:
  // LOADING, READY, UNLOADING or FAILED; a version with no entry is UNAVAILABLE)
  // and what goes with it.
  struct VersionEntry {
    StateInfo state;
    std::shared_ptr<ModelVersion> version;  // READY: the snapshot that serves
    std::string fingerprint;                // config + files `version` was built from
    double load_seconds = 0;                // its load and warm-up
    bool policy = false;                    // READY and selected by the version_policy
    // The last failed load of this number (FAILED, or a failed reload while an
    // older snapshot serves): not retried with the same files unless asked.
    std::string failed_why;
    std::string failed_fingerprint;
    int draining = 0;  // replaced or retired snapshots of this number still draining
    bool ready() const { return state.state == ModelState::kReady; }
  };
  struct Record {
    // The model's state (READY while a version is; the reason: failures of
    // the last load, if any), changed only through MoveModelLocked.
    StateInfo status{ModelState::kUnavailable, "unloaded"};
    std::map<int64_t, VersionEntry> versions;  // by number, changed only through MoveVersionLocked
    // The last load's plan failed (broken config, unknown backend...) while
    // versions serve: shown on their index entries; cleared by a good plan.
    std::string plan_error;
    VersionLabels labels;
    std::shared_ptr<const TrafficPolicy> traffic;  // published in the snapshot (manager/traffic.cc)
    bool traffic_from_runtime = false;
    std::string dir;
    std::string backend;                          // from the last plan
    bool pinned = false;                          // config parameter `pinned`: never evicted
    uint64_t last_bytes = 0;                      // resident bytes when last loaded: the next load's estimate
    TimePoint loaded_at{};                        // when the serving set last changed
    std::shared_ptr<const ServingModel> serving;  // published snapshot; null when nothing is READY

    bool Serving() const;           // a version is READY
    bool IsReady(int64_t v) const;  // version v is READY
    std::vector<int64_t> ReadyNumbers() const;
    int64_t DefaultVersion() const;
    uint64_t ResidentBytes() const;
    TimePoint LastUsed() const;
    bool Busy() const;
  };
  // One version of a record in the views (index, listing): READY ones, then
  // the others by number, each with its stored state.
  struct VersionRow {
    int64_t version;
    ModelState state;
    std::string reason;
    const VersionEntry* entry;
  };
  static std::vector<VersionRow> VersionRows(const Record& r);
  // The one way a stored state changes: the transition table of
  // manager/model_state.h decides; an illegal move is logged as a bug and
  // leaves the state as it was. A version that becomes UNAVAILABLE loses its
  // entry. `reason` replaces the stored one (nullopt: kept).
  void MoveModelLocked(const std::string& name, Record& r, LifecycleEvent event,
                       std::optional<std::string> reason = std::nullopt) TSA_REQUIRES(mu_);
  void MoveVersionLocked(const std::string& name, Record& r, int64_t version, LifecycleEvent event,
                         std::optional<std::string> reason = std::nullopt) TSA_REQUIRES(mu_);
  // The names of the repository's models and of every model with a record.
  std::set<std::string> KnownNamesLocked(const std::vector<std::string>& repository_names) const
      TSA_REQUIRES_SHARED(mu_);
  using Retired = std::vector<std::pair<int64_t, std::shared_ptr<ModelVersion>>>;

  // The functions below run under the model's lock (model_locks_): each
  // takes the caller's KeyedMutex::Lock as proof and asserts it holds `name`.
  //
  // Reconcile's load within the memory budget when one is active (manager/residency.cc).
  Status LoadWithinBudgetLocked(const KeyedMutex::Lock& held, const std::string& name, const Aspiration& want)
      TSA_EXCLUDES(mu_, room_mu_);
  // The load itself: plan, load new and changed versions, swap, drain the retired ones.
  Status LoadLocked(const KeyedMutex::Lock& held, const std::string& name, const Aspiration& want) TSA_EXCLUDES(mu_);
  Status UnloadLocked(const KeyedMutex::Lock& held, const std::string& name) TSA_EXCLUDES(mu_);
  Status EnsureResidentLocked(const KeyedMutex::Lock& held, const std::string& name) TSA_EXCLUDES(mu_);
  // Rebuilds the published snapshot after a change to `r`.
  void PublishLocked(const std::string& name, Record& r) TSA_REQUIRES(mu_);
  // Records `st` on the model after a failed plan.
  void RecordPlanFailureLocked(const std::string& name, const Status& st) TSA_REQUIRES(mu_);
  // Drains the retired snapshots (their versions were moved to UNLOADING or
  // replaced), then tells each version entry (kDrained once its last one is done).
  void DrainRetired(const std::string& name, Retired retired) TSA_EXCLUDES(mu_);
  LabelsInfo LabelsInfoLocked(const std::string& name, const Record& r) const TSA_REQUIRES_SHARED(mu_);
  // Whether the version_policy, a label or the traffic policy still wants `version`.
  bool StillWantedLocked(const Record& r, int64_t version) const TSA_REQUIRES_SHARED(mu_);
  const Record* ReadyRecordLocked(const std::string& name) const TSA_REQUIRES_SHARED(mu_);
  // Records the current default in the label history; persists the labels
  // when `always` or when the history changed.
  Status SaveLabelsLocked(const std::string& name, Record& r, bool always) TSA_REQUIRES(mu_);

  // --- residency (manager/residency.cc) ---
  bool BudgetActive() const { return loader_ && options_.memory_budget_bytes > 0; }
  uint64_t EstimateBytes(const std::string& name) const TSA_EXCLUDES(mu_);
  // Chooses and detaches least-recently-used idle models (never `keep`) until
  // `incoming` more bytes fit; returns the bytes in use afterwards (incoming
  // and loads in progress included) and the detached models to drain.
  uint64_t MakeRoomLocked(const std::string& keep, uint64_t incoming, std::vector<std::pair<std::string, Retired>>* out)
      TSA_REQUIRES(room_mu_) TSA_EXCLUDES(mu_);
  // Detaches an idle resident model (state EVICTED); returns its bytes, 0 if
  // it is busy, pinned, locked or gone.
  uint64_t DetachForEviction(const std::string& name, Retired* out) TSA_EXCLUDES(mu_);
  void DrainEvicted(std::vector<std::pair<std::string, Retired>> evicted) TSA_EXCLUDES(mu_, room_mu_);

  Options options_;
  const SchedulerFactory builtin_schedulers_ = SchedulerFactory::WithBuiltins();
  std::unique_ptr<ControlStateStore> memory_state_;  // when Options::state is null
  const ModelRepository* repository_;
  const BackendRegistry* backends_;
  Clock* clock_;
  std::atomic<bool> shutting_down_{false};

  // One lock per model name: serializes load/unload/labels/eviction of a
  // model (held across backend loads and drains; never by requests).
  KeyedMutex model_locks_;
  mutable SharedMutex mu_;
  std::map<std::string, Record> models_ TSA_GUARDED_BY(mu_);

  // Serializes budget decisions. Lock order: room_mu_, then mu_.
  Mutex room_mu_;
  uint64_t reserved_bytes_ TSA_GUARDED_BY(room_mu_) = 0;  // estimates of loads in progress

  LifecycleMetrics metrics_;
  std::unique_ptr<OnDemandLoader> loader_;  // kOnDemand only
};

}  // namespace inferd

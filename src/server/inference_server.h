// InferenceServer: the one API every front end (HTTP now, gRPC later) calls.
// Front ends translate wire formats to these calls and map Status codes to
// their protocol at the edge; no request logic lives in them.
//
// Thread-safety: all public methods are thread-safe. InferAsync never runs
// model code on the calling thread; its callback runs exactly once, either
// synchronously (request rejected before queueing) or later on a model
// worker thread, and must not block.
//
// Ownership: the BackendRegistry and Clock are not owned and must outlive
// the server.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "core/clock.h"
#include "core/infer_request.h"
#include "core/keyed_mutex.h"
#include "lifecycle/version_labels.h"
#include "metrics/histogram.h"
#include "metrics/prometheus.h"
#include "repository/repository.h"
#include "server/model_version.h"
#include "server/on_demand_loader.h"
#include "server/server_types.h"

namespace inferd {

enum class ModelControlMode { kNone, kPoll, kExplicit };
// kEager: models load when the control mode says (start-up, poll, load
// calls). kOnDemand: every repository model is indexed at start-up and
// loads on its first request; a memory budget evicts idle ones (LRU).
enum class Residency { kEager, kOnDemand };

struct ServerOptions {
  std::string model_repository;
  ModelControlMode control_mode = ModelControlMode::kNone;
  // kExplicit / kPoll: models to load at start-up ("*" = all; kPoll loads
  // all when empty).
  std::vector<std::string> startup_models;
  // Queue bound for models whose config sets no max_queue_size.
  size_t default_max_queue_size = 1024;
  // Intra-op threads for models without INTRA_OP_THREAD_COUNT.
  int default_intra_op_threads = 1;
  // kPoll: how often the repository is rescanned (0 = only PollRepository calls).
  std::chrono::milliseconds poll_interval{std::chrono::seconds(15)};
  // If true, /v2/health/ready also needs every repository model READY.
  bool strict_readiness = false;

  Residency residency = Residency::kEager;
  // kOnDemand: bytes all resident models may hold (0 = no budget). Models
  // are sized by ModelVersion::resident_bytes.
  uint64_t memory_budget_bytes = 0;
  // kOnDemand: a model is not evicted before it has been resident this long.
  Duration min_residency = std::chrono::seconds(1);
  // kOnDemand: threads loading models for waiting requests (loads of
  // different models run in parallel, one model loads once).
  int model_load_threads = 2;
  // kOnDemand: longest a request waits for its model to load (a smaller
  // request `timeout` parameter wins); then DEADLINE_EXCEEDED.
  Duration load_wait = std::chrono::seconds(30);
};

class InferenceServer {
 public:
  InferenceServer(ServerOptions options, const BackendRegistry* backends, Clock* clock);
  ~InferenceServer();

  // Loads the start-up models. A model that fails to load is logged and
  // shown in the repository index; only an unreadable repository fails Start.
  Status Start();
  // Stops accepting inference (UNAVAILABLE), finishes accepted requests,
  // releases all models. Idempotent.
  void Shutdown();

  bool IsLive() const { return live_.load(); }
  bool IsReady() const;

  ServerMetadata GetServerMetadata() const;
  Result<ModelMetadata> GetModelMetadata(const std::string& name, const std::string& version) const;
  // OK(true/false) for a known model; NOT_FOUND for an unknown one.
  Result<bool> IsModelReady(const std::string& name, const std::string& version) const;
  Result<std::string> GetModelConfigJson(const std::string& name, const std::string& version) const;
  // `name` empty = all loaded models.
  Result<std::vector<ModelStatsSnapshot>> GetStatistics(const std::string& name, const std::string& version) const;

  Result<std::vector<RepositoryIndexEntry>> RepositoryIndex(bool ready_only) const;
  // `config_json`: optional ModelConfig JSON replacing config.pbtxt.
  // Loads or reloads a model as a set of immutable version snapshots: the
  // versions its version_policy selects plus those its labels point at.
  // Unchanged versions (same config and files) keep serving untouched; new or
  // changed ones load and warm up before they take requests; a version that
  // fails never replaces a serving one (its error shows in the index).
  Status LoadModel(const std::string& name, const std::optional<std::string>& config_json = {});
  Status UnloadModel(const std::string& name);
  // kPoll: one rescan: new and changed models (re)load, removed ones unload.
  void PollRepository();

  // Version labels. A label names a version of the model's repository; the
  // version is loaded when a label points at it. `stable`, when set, is the
  // default version for unversioned requests (else the newest version the
  // policy selects). Changes persist in <model>/version_labels.json.
  Result<LabelsInfo> GetLabels(const std::string& name) const;
  Result<LabelsInfo> SetLabel(const std::string& name, const std::string& label, const std::string& version);
  Result<LabelsInfo> DeleteLabel(const std::string& name, const std::string& label);
  // The version string a label points at (NOT_FOUND for an unknown label).
  Result<std::string> ResolveLabel(const std::string& name, const std::string& label) const;
  // Makes the previous default version the default again (sets `stable`),
  // loading it if needed. FAILED_PRECONDITION when there is none.
  Result<RollbackResult> Rollback(const std::string& name);

  void InferAsync(std::unique_ptr<InferRequest> request, InferCallback callback);

  // Prometheus exposition of all model and server metrics.
  void WriteMetrics(PrometheusWriter& w) const;

  // Every model the server knows, with versions, labels and memory, for
  // `inferd models` (GET /v2/repository/models).
  ModelListing ListModels() const;

  const ServerOptions& options() const { return options_; }

 private:
  struct ModelEntry {
    std::map<int64_t, std::shared_ptr<ModelVersion>> versions;  // serving, ascending
    std::map<int64_t, std::string> fingerprints;                // of serving versions
    std::set<int64_t> policy_versions;                          // serving versions the policy selects
    struct FailedVersion {
      std::string why;
      std::string fingerprint;  // not retried by polls until the files change
    };
    std::map<int64_t, FailedVersion> failed;  // from the last load
    VersionLabels labels;
    std::string dir;
    std::string reason;        // why nothing (or not everything) serves
    bool load_failed = false;  // the last load served nothing because of an error
    bool pinned = false;       // config parameter `pinned`: never evicted (on-demand)
    uint64_t last_bytes = 0;   // resident bytes when last loaded: the next load's estimate
    TimePoint loaded_at{};     // when the serving set last changed

    uint64_t ResidentBytes() const;
    TimePoint LastUsed() const;
    bool Busy() const;

    // `stable` if it serves, else the newest policy-selected serving version,
    // else the newest serving one; 0 when nothing serves.
    int64_t DefaultVersion() const;
  };

  Result<std::shared_ptr<ModelVersion>> FindVersion(const std::string& name, const std::string& version) const;
  // FindVersion; for a model that is not resident under on-demand residency
  // also starts its load (the caller answers "retry").
  Result<std::shared_ptr<ModelVersion>> FindVersionOrPrefetch(const std::string& name,
                                                              const std::string& version) const;
  // InferAsync's body. `may_wait`: a request for a model that is not
  // resident waits for its load (on-demand), once.
  void Dispatch(std::unique_ptr<InferRequest> request, InferCallback callback, TimePoint arrival, bool may_wait);
  bool CanWaitForLoad(const Status& lookup) const;
  void WaitForLoad(std::unique_ptr<InferRequest> request, InferCallback callback, TimePoint arrival);

  // --- residency (residency.cc) ---
  // Creates or refreshes the index entry of a model that is not loaded.
  // REQUIRES the model's lock. Returns whether the model is pinned.
  bool IndexModelLocked(const std::string& name);
  // The loader's job: LoadIfOnDemandLocked under the model's lock.
  Status EnsureResident(const std::string& name);
  // On demand: loads a repository model that is not resident (for waiting
  // requests, and so labels and rollback work on any indexed model); errors
  // say the model could not be loaded. REQUIRES the model's lock.
  Status LoadIfOnDemandLocked(const std::string& name);
  // LoadModelLocked inside the memory budget: evicts idle models to make
  // room for the model's estimated size first, and after the load if its
  // measured size still leaves the budget exceeded. REQUIRES the model's lock.
  Status LoadWithinBudgetLocked(const std::string& name, const std::optional<std::string>& config_text = {},
                                const std::optional<VersionLabels>& labels_override = {}, bool retry_failed = true);
  bool BudgetActive() const { return options_.residency == Residency::kOnDemand && options_.memory_budget_bytes > 0; }
  uint64_t EstimateBytes(const std::string& name) const;
  // Evicts least-recently-used idle models (never `keep`) until `incoming`
  // more bytes fit. Returns the bytes in use afterwards, `incoming` and
  // loads in progress included. REQUIRES room_mu_.
  uint64_t MakeRoomLocked(const std::string& keep, uint64_t incoming);
  // Unloads an idle resident model; returns its bytes, 0 if it is busy,
  // pinned, locked or gone.
  uint64_t Evict(const std::string& name);
  // `retry_failed`: also retry versions that failed before with unchanged
  // files (explicit loads do; polls and label changes do not). Any error is
  // also recorded on the model's entry (reason, and state when nothing serves).
  Status LoadModelLocked(const std::string& name, const std::optional<std::string>& config_text,
                         const std::optional<VersionLabels>& labels_override = {}, bool retry_failed = true);
  LabelsInfo LabelsInfoLocked(const std::string& name, const ModelEntry& e) const;
  // The entry of a model with serving versions, or null. REQUIRES mu_.
  const ModelEntry* ServingEntryLocked(const std::string& name) const;
  // FindVersion's error for a model with nothing serving (NOT_FOUND or UNAVAILABLE).
  Status NotServingError(const std::string& name) const;
  // Records the current default in the history; writes version_labels.json
  // when `always`, or when the history changed. REQUIRES mu_ (exclusive).
  Status SaveLabelsLocked(ModelEntry& e, bool always);
  // FAILED_PRECONDITION unless model control is explicit.
  Status RequireExplicitControl() const;
  void ReleaseVersions(std::map<int64_t, std::shared_ptr<ModelVersion>> old);

  // Lifecycle metrics (WriteMetrics).
  struct LifecycleMetrics {
    Histogram load_seconds{Histogram::LoadSecondsBuckets()};
    Histogram unload_seconds{Histogram::LoadSecondsBuckets()};
    Histogram eviction_age_seconds{Histogram::AgeSecondsBuckets()};
    std::atomic<uint64_t> load_failures{0}, cold_starts{0}, evictions{0}, over_budget_loads{0};
    std::atomic<uint64_t> cold_start_timeouts{0};
  };

  ServerOptions options_;
  const BackendRegistry* backends_;
  Clock* clock_;
  ModelRepository repository_;
  ModelVersion::Options version_options_;

  std::atomic<bool> live_{true};
  std::atomic<bool> started_{false};
  std::atomic<bool> shutting_down_{false};

  // One lock per model name: serializes load/unload/labels/eviction of a
  // model (held across backend loads; never by infer).
  KeyedMutex model_locks_;
  mutable std::shared_mutex mu_;
  std::map<std::string, ModelEntry> models_;  // guarded by mu_

  std::mutex room_mu_;           // serializes budget decisions
  uint64_t reserved_bytes_ = 0;  // estimates of loads in progress; guarded by room_mu_
  mutable LifecycleMetrics lifecycle_;
  std::unique_ptr<OnDemandLoader> loader_;  // kOnDemand only

  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  std::thread poll_thread_;
};

}  // namespace inferd

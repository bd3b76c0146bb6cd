// AdminService: the management side of the server, apart from the request
// path -- explicit model control, the repository index and listing, version
// labels and rollback, traffic policies, progressive rollouts and batch jobs.
// Front ends reach it through InferenceServer::admin(); calls that may wait
// for a model load go through Run (one admin thread shared by every front
// end, never a protocol library's I/O thread).
//
// Thread-safety: all methods are thread-safe.
// Ownership: the parts are not owned; they outlive the service (the
// InferenceServer owns both).
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "manager/model_views.h"
#include "server/admin_executor.h"
#include "server/server_types.h"

namespace inferd {

class ClusterService;
class LoraService;
class ModelManager;
class RepositorySource;
class RolloutService;
namespace jobs {
class JobManager;
}

class AdminService {
 public:
  struct Parts {
    ModelManager* manager = nullptr;
    RepositorySource* source = nullptr;
    RolloutService* rollouts = nullptr;
    jobs::JobManager* jobs = nullptr;
    AdminExecutor* executor = nullptr;
    // --model-control-mode: "none", "poll" or "explicit" (only explicit allows load/unload after start-up).
    std::string control_mode = "none";
    const std::atomic<bool>* started = nullptr;   // the server finished Start
    const std::atomic<bool>* stopping = nullptr;  // Shutdown began
    ClusterService* cluster = nullptr;            // null on a single node
    LoraService* loras = nullptr;                 // a loaded model's adapters are re-read (may be null)
  };
  explicit AdminService(Parts parts) : p_(parts) {}

  // Runs a management job (load, unload, labels, rollback, job submission:
  // calls that may block for a model load) on the admin thread. `cancelled`
  // is true when the server is stopping: the job then only answers its caller.
  void Run(AdminExecutor::Job job) { p_.executor->Post(std::move(job)); }
  // LoRA adapters of the generative models (server/lora_service.h): the load
  // API and the listing. Load reads the adapter: call it through Run.
  LoraService& loras() const { return *p_.loras; }

  Result<std::vector<RepositoryIndexEntry>> RepositoryIndex(bool ready_only) const;
  // Cluster mode: this node's view of the cluster as JSON (GET /v2/cluster);
  // FAILED_PRECONDITION on a single node.
  Result<std::string> ClusterStatus() const;
  // Cluster mode: whether this server is in a cluster (front ends then keep
  // each HTTP request's wire form, InferRequest::wire, for forwarding).
  bool clustered() const { return p_.cluster != nullptr; }
  // Cluster mode: joins the cluster once the front ends listen at these
  // addresses (host:port; grpc "" = none). FAILED_PRECONDITION without
  // --cluster; INVALID_ARGUMENT for a bad address.
  Status JoinCluster(const std::string& http_address, const std::string& grpc_address);
  // Every model the server knows, with versions, labels, memory and its
  // rollout, for `inferd models` (GET /v2/repository/models).
  ModelListing ListModels() const;
  // `config_json`: optional ModelConfig JSON replacing config.pbtxt.
  // Loads or reloads a model as a set of immutable version snapshots: the
  // versions its version_policy selects plus those its labels point at.
  // Unchanged versions (same config and files) keep serving untouched; new or
  // changed ones load and warm up before they take requests; a version that
  // fails never replaces a serving one (its error shows in the index).
  // FAILED_PRECONDITION after start-up unless model control is explicit.
  Status LoadModel(const std::string& name, const std::optional<std::string>& config_json = {});
  Status UnloadModel(const std::string& name);
  // kPoll: one rescan: new and changed models (re)load, removed ones unload.
  void PollRepository();

  // Version labels. A label names a version of the model's repository; the
  // version is loaded when a label points at it. `stable`, when set, is the
  // default version for unversioned requests (else the newest version the
  // policy selects). Changes persist in the control state.
  Result<LabelsInfo> GetLabels(const std::string& name) const;
  Result<LabelsInfo> SetLabel(const std::string& name, const std::string& label, const std::string& version);
  Result<LabelsInfo> DeleteLabel(const std::string& name, const std::string& label);
  // Makes the previous default version the default again (sets `stable`),
  // loading it if needed. FAILED_PRECONDITION when there is none.
  Result<RollbackResult> Rollback(const std::string& name);
  // Traffic policies (canary / A/B / shadow; manager/traffic.cc). `json`: the
  // API form (lifecycle/traffic_policy.h); malformed -> INVALID_ARGUMENT,
  // nothing changes.
  Result<TrafficInfo> GetTraffic(const std::string& name) const;
  Result<TrafficInfo> SetTraffic(const std::string& name, std::string_view json);
  Result<TrafficInfo> ClearTraffic(const std::string& name);
  // Progressive rollouts (server/rollout_controller.h). `json`: the API form.
  Result<std::string> StartRollout(const std::string& name, std::string_view json);
  Result<std::string> GetRollout(const std::string& name) const;
  Result<std::string> AbortRollout(const std::string& name);
  // Batch prediction jobs (jobs/job_manager.h): documents as JSON.
  // SubmitJob validates (it may load the model): call it through Run.
  Result<std::string> SubmitJob(std::string_view spec_json);
  Result<std::string> GetJob(const std::string& id) const;
  std::string ListJobs() const;
  Result<std::string> CancelJob(const std::string& id);

 private:
  // FAILED_PRECONDITION unless model control is explicit.
  Status RequireExplicitControl() const;

  const Parts p_;
};

}  // namespace inferd

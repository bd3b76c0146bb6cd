#include "server/admin_service.h"

#include "jobs/job_manager.h"
#include "lifecycle/traffic_policy.h"
#include "manager/model_manager.h"
#include "manager/repository_source.h"
#include "repository/model_config.h"
#include "routing/routing_policy.h"
#include "server/cluster_service.h"
#include "server/lora_service.h"
#include "server/rollout_service.h"

namespace inferd {

ModelListing AdminService::ListModels() const {
  ModelListing listing = p_.manager->ListModels();
  if (!p_.rollouts) return listing;
  const std::map<std::string, RolloutState> all = p_.rollouts->controller().All();
  if (all.empty()) return listing;
  for (auto& m : listing.models) {
    auto it = all.find(m.name);
    if (it == all.end()) continue;
    const RolloutState& s = it->second;
    ModelListing::Model::Rollout r;
    r.phase = std::string(RolloutPhaseName(s.phase));
    r.version = s.spec.version;
    r.canary_percent = s.canary_percent();
    if (s.phase == RolloutPhase::kRunning) {
      r.step = s.step + 1;
      r.steps = s.spec.steps.size();
    }
    r.reason = s.reason;
    m.rollout = std::move(r);
  }
  return listing;
}

Result<std::string> AdminService::ClusterStatus() const {
  if (p_.cluster == nullptr)
    return Status::FailedPrecondition("this server is not in a cluster (start it with --cluster etcd://HOST:PORT)");
  return p_.cluster->StatusJson();
}

Status AdminService::JoinCluster(const std::string& http_address, const std::string& grpc_address) {
  if (p_.cluster == nullptr) return Status::FailedPrecondition("not in cluster mode (--cluster not given)");
  return p_.cluster->Join(http_address, grpc_address);
}

Result<std::vector<RepositoryIndexEntry>> AdminService::RepositoryIndex(bool ready_only) const {
  return p_.manager->RepositoryIndex(ready_only);
}

Status AdminService::RequireExplicitControl() const {
  if (p_.control_mode == "explicit") return Status::OK();
  return Status::FailedPrecondition("model load / unload is not allowed with --model-control-mode=" + p_.control_mode +
                                    " (it needs explicit)");
}

Status AdminService::LoadModel(const std::string& name, const std::optional<std::string>& config_json) {
  if (p_.stopping->load()) return Status::Unavailable("the server is shutting down");
  if (p_.started->load()) INFERD_RETURN_IF_ERROR(RequireExplicitControl());
  Aspiration want;
  if (config_json) {
    INFERD_ASSIGN_OR_RETURN(std::string t, ModelConfigJsonToText(*config_json));
    want.config_text = std::move(t);
  }
  Status st = p_.manager->Reconcile(name, want);
  if (p_.loras) p_.loras->ScanModel(name);  // the repository API's load re-reads its loras/ folder
  return st;
}

Status AdminService::UnloadModel(const std::string& name) {
  INFERD_RETURN_IF_ERROR(RequireExplicitControl());
  Aspiration want;
  want.serve = false;
  return p_.manager->Reconcile(name, want);
}

void AdminService::PollRepository() {
  if (!p_.stopping->load()) p_.source->Poll();
}

Result<TrafficInfo> AdminService::SetTraffic(const std::string& name, std::string_view json) {
  INFERD_ASSIGN_OR_RETURN(TrafficPolicy policy, ParseTrafficPolicyJson(json));
  return p_.manager->SetTraffic(name, std::move(policy));
}

Result<std::string> AdminService::StartRollout(const std::string& name, std::string_view json) {
  INFERD_ASSIGN_OR_RETURN(RolloutRequest request, ParseRolloutRequestJson(json));
  INFERD_ASSIGN_OR_RETURN(RolloutState state, p_.rollouts->controller().Start(name, std::move(request)));
  return RolloutStateToJson(name, state);
}

Result<std::string> AdminService::GetRollout(const std::string& name) const {
  INFERD_ASSIGN_OR_RETURN(RolloutState state, p_.rollouts->controller().Get(name));
  return RolloutStateToJson(name, state);
}

Result<std::string> AdminService::AbortRollout(const std::string& name) {
  INFERD_ASSIGN_OR_RETURN(RolloutState state, p_.rollouts->controller().Abort(name, "aborted through the API"));
  return RolloutStateToJson(name, state);
}

Result<LabelsInfo> AdminService::SetLabel(const std::string& name, const std::string& label,
                                          const std::string& version) {
  INFERD_RETURN_IF_ERROR(ValidateLabelName(label));
  INFERD_ASSIGN_OR_RETURN(VersionRef ref, VersionRef::Parse(version));
  if (ref.kind != VersionRef::Kind::kNumber) {
    return Status::InvalidArgument("invalid model version '': versions are positive integers");
  }
  return p_.manager->SetLabel(name, label, ref.number);
}

Result<LabelsInfo> AdminService::GetLabels(const std::string& name) const { return p_.manager->GetLabels(name); }

Result<TrafficInfo> AdminService::GetTraffic(const std::string& name) const { return p_.manager->GetTraffic(name); }

Result<TrafficInfo> AdminService::ClearTraffic(const std::string& name) { return p_.manager->ClearTraffic(name); }

Result<RollbackResult> AdminService::Rollback(const std::string& name) { return p_.manager->Rollback(name); }

Result<LabelsInfo> AdminService::DeleteLabel(const std::string& name, const std::string& label) {
  return p_.manager->DeleteLabel(name, label);
}

Result<std::string> AdminService::SubmitJob(std::string_view spec_json) { return p_.jobs->Submit(spec_json); }
Result<std::string> AdminService::GetJob(const std::string& id) const { return p_.jobs->Get(id); }
std::string AdminService::ListJobs() const { return p_.jobs->List(); }
Result<std::string> AdminService::CancelJob(const std::string& id) { return p_.jobs->Cancel(id); }

}  // namespace inferd

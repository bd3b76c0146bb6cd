// ModelManager: traffic policies (canary / A/B splits, shadow shares). A
// policy changes no loaded version: it is checked against the model's
// labels and repository versions, persisted in the control state, and
// published with the next snapshot.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>

#include "manager/model_manager.h"

namespace inferd {
namespace {

TrafficInfo Info(const std::string& name, const std::shared_ptr<const TrafficPolicy>& policy, bool runtime) {
  TrafficInfo info;
  info.model = name;
  info.source = policy ? (runtime ? "runtime" : "config") : "none";
  info.policy_json = policy ? TrafficPolicyToJson(*policy) : "{}";
  info.json = TrafficAnswerJson(info.model, info.source, info.policy_json);
  return info;
}

// A target must be a label the model has or a version in its repository.
Status CheckTarget(const std::string& name, const std::string& target, const VersionLabels& labels,
                   const std::vector<int64_t>& available) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(target.data(), target.data() + target.size(), v);
  if (ec == std::errc() && p == target.data() + target.size()) {
    if (std::binary_search(available.begin(), available.end(), v)) return Status::OK();
    return Status::InvalidArgument("traffic policy: model '" + name + "' has no version " + target +
                                   " in the repository");
  }
  if (labels.Find(target)) return Status::OK();
  return Status::InvalidArgument("traffic policy: model '" + name + "' has no label '" + target +
                                 "' (label a version first, or name a version number)");
}

}  // namespace

Result<TrafficInfo> ModelManager::GetTraffic(const std::string& name) const {
  {
    ReaderLock g(&mu_);
    if (const Record* r = ReadyRecordLocked(name)) return Info(name, r->traffic, r->traffic_from_runtime);
  }
  return NotServing(name);
}

Result<TrafficInfo> ModelManager::SetTraffic(const std::string& name, TrafficPolicy policy) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  VersionLabels labels;
  {
    ReaderLock g(&mu_);
    const Record* r = ReadyRecordLocked(name);
    if (!r) return NotServing(name).WithPrefix("load the model before setting its traffic");
    labels = r->labels;
  }
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_->ReadModel(name));
  for (const auto& s : policy.split)
    INFERD_RETURN_IF_ERROR(CheckTarget(name, s.target, labels, src.available_versions));
  if (!policy.shadow_target.empty())
    INFERD_RETURN_IF_ERROR(CheckTarget(name, policy.shadow_target, labels, src.available_versions));
  const std::string json = TrafficPolicyToJson(policy);
  INFERD_RETURN_IF_ERROR(options_.state->Put(name, "traffic", json));
  WriterLock g(&mu_);
  Record& r = models_[name];
  r.traffic = std::make_shared<const TrafficPolicy>(std::move(policy));
  r.traffic_from_runtime = true;
  PublishLocked(name, r);
  spdlog::info("model '{}': traffic policy set: {}", name, json);
  return Info(name, r.traffic, true);
}

Result<TrafficInfo> ModelManager::ClearTraffic(const std::string& name) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  {
    ReaderLock g(&mu_);
    if (!ReadyRecordLocked(name)) return NotServing(name);
  }
  INFERD_RETURN_IF_ERROR(options_.state->Put(name, "traffic", "{}"));
  // The config's policy applies again: what the next plan would read.
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_->ReadModel(name));
  INFERD_ASSIGN_OR_RETURN(auto config_traffic, TrafficPolicyFromParameters(src.spec.parameters));
  WriterLock g(&mu_);
  Record& r = models_[name];
  r.traffic = config_traffic ? std::make_shared<const TrafficPolicy>(std::move(*config_traffic)) : nullptr;
  r.traffic_from_runtime = false;
  PublishLocked(name, r);
  spdlog::info("model '{}': run-time traffic policy cleared", name);
  return Info(name, r.traffic, false);
}

}  // namespace inferd

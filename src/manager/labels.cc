// ModelManager: version labels and rollback. A label change is a source like
// any other: it asks for the model with new labels, the versions they point
// at load (and warm up) first, and the labels take effect only if they did.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "manager/model_manager.h"

namespace inferd {

LabelsInfo ModelManager::LabelsInfoLocked(const std::string& name, const Record& r) const {
  LabelsInfo info;
  info.model = name;
  if (const int64_t d = r.DefaultVersion()) info.default_version = std::to_string(d);
  for (int64_t v : r.ReadyNumbers()) info.serving_versions.push_back(std::to_string(v));
  for (const auto& [l, v] : r.labels.labels) info.labels.emplace_back(l, std::to_string(v));
  for (int64_t v : r.labels.history) info.history.push_back(std::to_string(v));
  return info;
}

Result<LabelsInfo> ModelManager::GetLabels(const std::string& name) const {
  {
    ReaderLock g(&mu_);
    if (const Record* r = ReadyRecordLocked(name)) return LabelsInfoLocked(name, *r);
  }
  return NotServing(name);
}

Result<int64_t> ModelManager::ResolveLabel(const std::string& name, const std::string& label) const {
  std::optional<int64_t> v;
  {
    ReaderLock g(&mu_);
    if (const Record* r = ReadyRecordLocked(name)) {
      v = r->labels.Find(label);
      if (!v) return Status::NotFound("model '" + name + "' has no label '" + label + "'");
      return *v;
    }
  }
  Status st = NotServing(name);
  if (!loader_ || st.code() != StatusCode::kUnavailable || shutting_down_.load()) return st;
  // On demand: the labels as the repository has them; the request that
  // follows loads the model.
  INFERD_ASSIGN_OR_RETURN(VersionLabels labels,
                          LoadVersionLabels(*options_.state, name, repository_->fs(), repository_->ModelDir(name)));
  v = labels.Find(label);
  if (!v) return Status::NotFound("model '" + name + "' has no label '" + label + "'");
  return *v;
}

Result<LabelsInfo> ModelManager::SetLabel(const std::string& name, const std::string& label, int64_t version) {
  INFERD_RETURN_IF_ERROR(ValidateLabelName(label));
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  INFERD_RETURN_IF_ERROR(EnsureResidentLocked(lock, name));
  Aspiration want;
  bool serving = false;
  {
    ReaderLock g(&mu_);
    const Record* r = ReadyRecordLocked(name);
    if (r) {
      want.labels = r->labels;
      serving = r->IsReady(version);
    }
  }
  if (!want.labels) return NotServing(name).WithPrefix("load the model before labelling its versions");
  want.labels->labels[label] = version;
  want.retry_failed = false;
  if (!serving) {
    // The version must exist in the repository; it loads (and warms up)
    // before the label moves. On failure nothing changes.
    INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_->ReadModel(name));
    if (!std::binary_search(src.available_versions.begin(), src.available_versions.end(), version)) {
      return Status::NotFound("model '" + name + "' has no version " + std::to_string(version) + " in the repository");
    }
    INFERD_RETURN_IF_ERROR(LoadWithinBudgetLocked(lock, name, want));
  }
  WriterLock g(&mu_);
  Record& r = models_[name];
  r.labels.labels[label] = version;
  INFERD_RETURN_IF_ERROR(SaveLabelsLocked(name, r, /*always=*/true));
  PublishLocked(name, r);
  spdlog::info("model '{}': label '{}' -> version {}", name, label, version);
  return LabelsInfoLocked(name, r);
}

Result<LabelsInfo> ModelManager::DeleteLabel(const std::string& name, const std::string& label) {
  auto lock = model_locks_.Acquire(name);
  INFERD_RETURN_IF_ERROR(EnsureResidentLocked(lock, name));
  Aspiration want;  // set when the version the label held is no longer wanted
  int64_t orphan = 0;
  {
    WriterLock g(&mu_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.Serving()) return NotServing(name);
    Record& r = it->second;
    auto l = r.labels.labels.find(label);
    if (l == r.labels.labels.end()) return Status::NotFound("model '" + name + "' has no label '" + label + "'");
    const int64_t v = l->second;
    r.labels.labels.erase(l);
    INFERD_RETURN_IF_ERROR(SaveLabelsLocked(name, r, /*always=*/true));
    PublishLocked(name, r);
    spdlog::info("model '{}': label '{}' deleted", name, label);
    if (r.IsReady(v) && !StillWantedLocked(r, v)) {
      orphan = v;
      want.labels = r.labels;
      want.retry_failed = false;
    }
  }
  if (orphan) {
    // Nothing keeps the version (a rolled-back canary): the model is planned
    // again with the labels left, which retires it (in-flight requests on it
    // complete first). Nothing loads: the other versions are unchanged.
    spdlog::info("model '{}': version {} has no label, policy or traffic share left: unloading it", name, orphan);
    if (Status st = LoadLocked(lock, name, want); !st.ok()) {
      spdlog::warn("model '{}': version {} stays loaded: {}", name, orphan, st.message());
    }
  }
  ReaderLock g(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotServing(name);
  return LabelsInfoLocked(name, it->second);
}

bool ModelManager::StillWantedLocked(const Record& r, int64_t version) const {
  if (auto e = r.versions.find(version); e != r.versions.end() && e->second.policy) return true;
  for (const auto& [l, v] : r.labels.labels)
    if (v == version) return true;
  if (r.traffic) {
    const std::string text = std::to_string(version);
    for (const auto& s : r.traffic->split)
      if (s.target == text) return true;
    if (r.traffic->shadow_target == text) return true;
  }
  return false;
}

Result<RollbackResult> ModelManager::Rollback(const std::string& name) {
  if (shutting_down_.load()) return Status::Unavailable("the server is shutting down");
  auto lock = model_locks_.Acquire(name);
  INFERD_RETURN_IF_ERROR(EnsureResidentLocked(lock, name));
  Aspiration want;
  int64_t from = 0;
  {
    ReaderLock g(&mu_);
    if (const Record* r = ReadyRecordLocked(name)) {
      want.labels = r->labels;
      from = r->DefaultVersion();
    }
  }
  if (!want.labels) return NotServing(name);
  INFERD_ASSIGN_OR_RETURN(ModelSource src, repository_->ReadModel(name));
  auto target = want.labels->RollbackTarget(from, [&](int64_t v) {
    return std::binary_search(src.available_versions.begin(), src.available_versions.end(), v);
  });
  if (!target) {
    return Status::FailedPrecondition("model '" + name + "' has no earlier default version to roll back to from " +
                                      std::to_string(from));
  }
  want.labels->labels[kStableLabel] = *target;
  want.labels->TruncateAfter(*target);
  want.retry_failed = false;
  // Loads the target if it is not serving.
  INFERD_RETURN_IF_ERROR(LoadWithinBudgetLocked(lock, name, want));
  RollbackResult result;
  result.model = name;
  result.from_version = std::to_string(from);
  result.to_version = std::to_string(*target);
  WriterLock g(&mu_);
  Record& r = models_[name];
  INFERD_RETURN_IF_ERROR(SaveLabelsLocked(name, r, /*always=*/true));
  result.labels = LabelsInfoLocked(name, r);
  spdlog::info("model '{}': rolled back from version {} to {}", name, from, *target);
  return result;
}

}  // namespace inferd

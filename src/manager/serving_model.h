// ServingModel: an immutable snapshot of what one model serves right now,
// published by the ModelManager on every change (load, swap, label change,
// unload) and read by the routing policy on the request path without holding
// any manager lock.
//
// Thread-safety: immutable once published; share through
// std::shared_ptr<const ServingModel>.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "lifecycle/traffic_policy.h"
#include "lifecycle/version_labels.h"
#include "manager/model_version.h"

namespace inferd {

struct ServingModel {
  std::string name;
  // READY versions, ascending; never empty in a published snapshot.
  std::map<int64_t, std::shared_ptr<ModelVersion>> versions;
  // The version unversioned requests get: `stable` when it serves, else the
  // newest version the version_policy selects, else the newest serving one.
  int64_t default_version = 0;
  VersionLabels labels;
  // How requests that name no version are spread (canary, A/B, shadow); null
  // = all to default_version. Targets are labels or version numbers.
  std::shared_ptr<const TrafficPolicy> traffic;
};

}  // namespace inferd

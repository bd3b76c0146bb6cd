// LoadPlan: what a load of one model works from -- the model as the
// repository has it now, its backend, its labels and the versions to serve
// (those the version_policy selects plus those labels point at) -- and the
// fingerprint that tells an unchanged version snapshot from a changed one.
//
// Thread-safety: pure functions over the repository (which only reads).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/status.h"
#include "lifecycle/traffic_policy.h"
#include "lifecycle/version_labels.h"
#include "repository/repository.h"

namespace inferd {

struct LoadPlan {
  ModelSource src;
  Backend* backend = nullptr;
  VersionLabels labels;
  std::vector<int64_t> selected;  // by the version_policy
  std::set<int64_t> wanted;       // selected + labelled
  std::string config_source;      // names the config in error messages
  bool pinned = false;            // config parameter `pinned`
  // The traffic policy: the one set at run time (control state) when there is
  // one, else the config's `traffic.*` parameters; null = none.
  std::shared_ptr<const TrafficPolicy> traffic;
  bool traffic_from_runtime = false;
};

// The run-time traffic policy persisted for `name` (control state document
// "traffic"); nullopt when none is set.
Result<std::optional<TrafficPolicy>> LoadRuntimeTraffic(const ControlStateStore& state, const std::string& name);

// `config_text` replaces config.pbtxt; `labels_override` replaces the
// model's persisted labels (read from `state` otherwise).
Result<LoadPlan> PlanLoad(const ModelRepository& repository, const BackendRegistry& backends,
                          const ControlStateStore& state, const std::string& name,
                          const std::optional<std::string>& config_text,
                          const std::optional<VersionLabels>& labels_override);

// What a loaded version was built from: its config and its files (name,
// size, modification time). A version whose fingerprint is unchanged keeps
// serving on reload; one whose files changed is reloaded.
std::string Fingerprint(const std::string& config_text, const Filesystem& fs, const std::string& version_dir);

}  // namespace inferd

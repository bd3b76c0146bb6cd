#include "manager/load_plan.h"

#include <algorithm>

#include "manager/model_version.h"

namespace inferd {

Result<LoadPlan> PlanLoad(const ModelRepository& repository, const BackendRegistry& backends,
                          const ControlStateStore& state, const std::string& name,
                          const std::optional<std::string>& config_text,
                          const std::optional<VersionLabels>& labels_override) {
  LoadPlan p;
  INFERD_ASSIGN_OR_RETURN(p.src, repository.ReadModel(name, config_text));
  std::vector<std::string> files;
  if (p.src.spec.backend.empty() && p.src.spec.platform.empty()) files = repository.NewestVersionFiles(p.src);
  auto backend = backends.ResolveSpec(&p.src.spec, files);
  if (!backend.ok()) return Status::InvalidArgument(p.src.config_path + ": " + backend.status().message());
  p.backend = *backend;
  if (labels_override) {
    p.labels = *labels_override;
  } else {
    INFERD_ASSIGN_OR_RETURN(p.labels, LoadVersionLabels(state, name, repository.fs(), p.src.dir));
  }
  const auto& available = p.src.available_versions;
  p.selected = ModelRepository::SelectVersions(p.src.spec.version_policy, available);
  p.wanted.insert(p.selected.begin(), p.selected.end());
  for (const auto& [label, v] : p.labels.labels)
    if (std::binary_search(available.begin(), available.end(), v)) p.wanted.insert(v);
  if (p.wanted.empty()) {
    return Status::NotFound("model '" + name + "' has no version folder that its version_policy selects in " +
                            p.src.dir);
  }
  p.config_source = p.src.has_config ? (config_text ? "load request config for '" + name + "'" : p.src.config_path)
                                     : p.src.dir + " (auto-completed config)";
  auto pinned = PinnedParameter(p.src.spec);
  if (!pinned.ok()) return pinned.status().WithPrefix(p.config_source);
  p.pinned = *pinned;
  auto config_traffic = TrafficPolicyFromParameters(p.src.spec.parameters);
  if (!config_traffic.ok()) return config_traffic.status().WithPrefix(p.config_source);
  INFERD_ASSIGN_OR_RETURN(auto runtime, LoadRuntimeTraffic(state, name));
  if (runtime) {
    p.traffic = std::make_shared<const TrafficPolicy>(std::move(*runtime));
    p.traffic_from_runtime = true;
  } else if (*config_traffic) {
    p.traffic = std::make_shared<const TrafficPolicy>(std::move(**config_traffic));
  }
  return p;
}

Result<std::optional<TrafficPolicy>> LoadRuntimeTraffic(const ControlStateStore& state, const std::string& name) {
  INFERD_ASSIGN_OR_RETURN(auto doc, state.Get(name, "traffic"));
  if (!doc || doc->empty() || *doc == "{}") return std::optional<TrafficPolicy>();
  auto policy = ParseTrafficPolicyJson(*doc);
  if (!policy.ok()) return policy.status().WithPrefix("the traffic policy stored in " + state.Describe());
  return std::optional<TrafficPolicy>(std::move(*policy));
}

std::string Fingerprint(const std::string& config_text, const Filesystem& fs, const std::string& version_dir) {
  std::string fp = config_text;
  for (const auto& f : fs.ListFilesRecursive(version_dir))
    fp += "\n" + f.path + "|" + std::to_string(f.bytes) + "|" + std::to_string(f.modified);
  return fp;
}

}  // namespace inferd

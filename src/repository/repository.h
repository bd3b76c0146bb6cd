// ModelRepository: reads a Triton-layout model repository on local disk.
//
//   <root>/<model>/config.pbtxt        (optional: backends may auto-complete)
//   <root>/<model>/<version>/model.pt  (numeric version folders; names
//                                       starting with '0' are ignored)
//
// It only reads; deciding what to load is the server's job.
// Thread-safety: const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/status.h"

namespace inferd {

struct ModelSource {
  std::string name;
  std::string dir;          // <root>/<name>
  std::string config_path;  // <dir>/config.pbtxt (may not exist)
  bool has_config = false;
  std::string config_text;                  // protobuf text (empty when there is no config)
  ModelSpec spec;                           // parsed; inputs may be empty until auto-complete
  std::vector<int64_t> available_versions;  // ascending
};

// Total size of the regular files under `dir` (0 if unreadable).
uint64_t DirectoryBytes(const std::string& dir);

class ModelRepository {
 public:
  explicit ModelRepository(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  // <root>/<name>; `name` must be a model name HasModel accepted.
  std::string ModelDir(const std::string& name) const;

  // Whether <root>/<name> is a model directory (cheap: no config parsing).
  bool HasModel(const std::string& name) const;

  // Names of model directories, sorted. Fails if the root is unreadable.
  Result<std::vector<std::string>> ListModels() const;

  // Reads one model. `config_override_text`, when given, replaces
  // config.pbtxt (KServe load with parameters.config).
  Result<ModelSource> ReadModel(const std::string& name,
                                const std::optional<std::string>& config_override_text = {}) const;

  // The versions the policy selects among `available` (ascending).
  static std::vector<int64_t> SelectVersions(const VersionPolicySpec& policy, const std::vector<int64_t>& available);

 private:
  std::string root_;
};

}  // namespace inferd

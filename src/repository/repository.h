// ModelRepository: reads a Triton-layout model repository through a
// Filesystem (local disk unless one is given).
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
#include "repository/filesystem.h"

namespace inferd {

struct ModelSource {
  std::string name;
  std::string dir;          // <root>/<name>, in the repository's Filesystem
  std::string config_path;  // <dir>/config.pbtxt (may not exist)
  bool has_config = false;
  std::string config_text;                  // protobuf text (empty when there is no config)
  ModelSpec spec;                           // parsed; inputs may be empty until auto-complete
  std::vector<int64_t> available_versions;  // ascending
};

class ModelRepository {
 public:
  explicit ModelRepository(std::string root, std::shared_ptr<const Filesystem> fs = LocalFilesystem())
      : root_(std::move(root)), fs_(std::move(fs)) {}

  const std::string& root() const { return root_; }
  const Filesystem& fs() const { return *fs_; }
  // <root>/<name>; `name` must be a model name HasModel accepted.
  std::string ModelDir(const std::string& name) const;
  // <root>/<name>/<version>.
  std::string VersionDir(const std::string& name, int64_t version) const;

  // Whether <root>/<name> is a model directory (cheap: no config parsing).
  bool HasModel(const std::string& name) const;

  // Names of model directories, sorted. Fails if the root is unreadable.
  Result<std::vector<std::string>> ListModels() const;

  // Reads one model. `config_override_text`, when given, replaces
  // config.pbtxt (KServe load with parameters.config).
  Result<ModelSource> ReadModel(const std::string& name,
                                const std::optional<std::string>& config_override_text = {}) const;

  // The file names directly in the newest available version folder (which
  // backend a config naming none means: BackendRegistry::Resolve). Empty
  // when there is no version.
  std::vector<std::string> NewestVersionFiles(const ModelSource& src) const;

  // The versions the policy selects among `available` (ascending).
  static std::vector<int64_t> SelectVersions(const VersionPolicySpec& policy, const std::vector<int64_t>& available);

 private:
  std::string root_;
  std::shared_ptr<const Filesystem> fs_;
};

}  // namespace inferd

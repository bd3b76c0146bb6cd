// ControlStateStore: where run-time control state lives -- version labels
// and the default-version history now; traffic rules and rollouts next --
// apart from the model repository, so a read-only repository works and the
// repository keeps only what its owners put there.
//
// State is a set of small JSON documents keyed by (model, name), e.g.
// ("fraud", "labels"). The directory store keeps each as
// <dir>/<model>/<name>.json, written atomically (temporary file + rename).
//
// Thread-safety: implementations are thread-safe; callers serialize writes
// to one model's documents (the ModelManager holds the model's lock).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace inferd {

class ControlStateStore {
 public:
  virtual ~ControlStateStore() = default;
  // Prepares the store (creates the directory, checks it can be written).
  virtual Status Open() { return Status::OK(); }
  // The document, or nullopt when there is none.
  virtual Result<std::optional<std::string>> Get(std::string_view model, std::string_view name) const = 0;
  // Replaces the document; readers see the old or the new one, never a mix.
  virtual Status Put(std::string_view model, std::string_view name, std::string_view text) = 0;
  // Where the state is, for logs and error messages.
  virtual std::string Describe() const = 0;
};

// State under `dir` (created by Open if missing).
std::unique_ptr<ControlStateStore> MakeDirectoryStateStore(std::string dir);
// State in memory only: lost when the server stops (tests, throwaway servers).
std::unique_ptr<ControlStateStore> MakeMemoryStateStore();

// The default --control-state-dir for a repository:
// $XDG_STATE_HOME/inferd/repositories/<key>, else
// $HOME/.local/state/inferd/repositories/<key>, else
// /var/lib/inferd/repositories/<key>, where <key> is the repository's
// absolute path with '_' doubled and '/' turned into '_' (one state directory
// per repository, and two repositories never share one).
std::string DefaultStateDirectory(const std::string& repository, const char* xdg_state_home, const char* home);

}  // namespace inferd

// VersionLabels: a model's named version labels ("stable", "canary", ...)
// and the history of its default version, persisted in the control-state
// store (document "labels" of the model) so they survive restarts:
//
//   {"labels": {"stable": 3, "canary": 4}, "history": [1, 2, 3]}
//
// Servers before the store kept them beside the model as
// <repo>/<model>/version_labels.json; that file is still read (never
// written) for a model the store has no labels for.
// (Not labels.txt: in Triton layouts that file holds classification labels.)
//
// Thread-safety: plain values and free functions; callers serialize writes
// to one model's labels (the manager holds the model's lock).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "lifecycle/control_state_store.h"
#include "repository/filesystem.h"  // the interface only (no link dependency)

namespace inferd {

inline constexpr const char* kVersionLabelsFile = "version_labels.json";
inline constexpr const char* kStableLabel = "stable";
inline constexpr size_t kMaxDefaultHistory = 100;

struct VersionLabels {
  std::map<std::string, int64_t, std::less<>> labels;  // looked up per unversioned request
  // Versions that have been the model's default, oldest first; consecutive
  // entries differ. Rollback walks it backwards.
  std::vector<int64_t> history;

  std::optional<int64_t> Find(std::string_view label) const;
  // Appends `version` unless it is already the last entry; keeps the newest
  // kMaxDefaultHistory entries. Returns whether anything changed.
  bool RecordDefault(int64_t version);
  // The version to roll back to from `current` default: drops trailing
  // entries equal to `current`, then the first remaining entry (from the end)
  // for which `usable` holds. nullopt when there is none. Does not modify.
  template <typename Pred>
  std::optional<int64_t> RollbackTarget(int64_t current, Pred usable) const {
    for (auto it = history.rbegin(); it != history.rend(); ++it)
      if (*it != current && usable(*it)) return *it;
    return std::nullopt;
  }
  // Removes history entries after the last occurrence of `target` (the
  // versions rolled back from), so a second rollback goes further back.
  void TruncateAfter(int64_t target);
};

// Label names: 1-64 of [A-Za-z0-9_.-], not all digits (those are versions).
Status ValidateLabelName(std::string_view label);

Result<VersionLabels> ParseVersionLabelsJson(std::string_view json);
std::string VersionLabelsToJson(const VersionLabels& labels);

// <model_dir>/version_labels.json in the repository's filesystem (the
// pre-store location; read, never written). Missing file = no labels. A
// corrupt file is an error naming the file.
Result<VersionLabels> ReadVersionLabels(const Filesystem& fs, const std::string& model_dir);

// The model's labels: from the store; else from the legacy file in
// `model_dir`; else none. A corrupt document is an error naming it.
Result<VersionLabels> LoadVersionLabels(const ControlStateStore& store, const std::string& model, const Filesystem& fs,
                                        const std::string& model_dir);
Status SaveVersionLabels(ControlStateStore& store, const std::string& model, const VersionLabels& labels);

}  // namespace inferd

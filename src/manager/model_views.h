// Plain views of the ModelManager's state, returned through the server
// facade to front ends: the repository index, version labels, rollback
// results and the model listing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace inferd {

struct RepositoryIndexEntry {
  std::string name;
  std::string version;  // "" when the model has no loaded version
  std::string state;    // READY | UNAVAILABLE | LOADING | UNLOADING
  std::string reason;
};

// A model's version labels and default version (GET /v2/repository/models/{m}/labels).
struct LabelsInfo {
  std::string model;
  std::string default_version;                              // "" when nothing serves
  std::vector<std::string> serving_versions;                // ascending
  std::vector<std::pair<std::string, std::string>> labels;  // label -> version, sorted by label
  std::vector<std::string> history;                         // past defaults, oldest first
};

// A model's traffic policy (GET/PUT /v2/models/{m}/traffic).
struct TrafficInfo {
  std::string model;
  std::string source;       // "runtime" (set through the API), "config" (config.pbtxt parameters) or "none"
  std::string policy_json;  // TrafficPolicyToJson; "{}" for none
  std::string json;         // the API's answer: TrafficAnswerJson (model, source, policy)
};

struct RollbackResult {
  std::string model;
  std::string from_version, to_version;
  LabelsInfo labels;  // after the rollback
};

// GET /v2/repository/models: everything `inferd models` shows.
struct ModelListing {
  struct Version {
    std::string version;
    std::string state;  // READY | UNAVAILABLE
    std::string reason;
    uint64_t resident_bytes = 0;
    std::string size_source;  // measured | config | files
    double load_seconds = 0;  // load and warm-up of a READY version
  };
  struct Model {
    std::string name;
    std::string backend;  // "" until the model was planned for a load
    std::string state;    // READY | LOADING | UNAVAILABLE
    std::string reason;
    std::string default_version;
    std::vector<Version> versions;
    std::vector<std::pair<std::string, std::string>> labels;
    uint64_t resident_bytes = 0;
    bool pinned = false;
    int64_t idle_ms = -1;  // since the last request; -1 when not resident
    // The model's rollout, running or the last one ended (filled by the
    // server's RolloutService, not the manager).
    struct Rollout {
      std::string phase;  // running, promoted, rolled back, aborted
      std::string version;
      uint32_t canary_percent = 0;
      size_t step = 0, steps = 0;  // while running: step (1-based) of steps
      std::string reason;          // why it ended, with the measured numbers
    };
    std::optional<Rollout> rollout;
  };
  std::string residency;  // eager | on-demand
  uint64_t budget_bytes = 0, used_bytes = 0;
  std::vector<Model> models;
};

}  // namespace inferd

// Plain result types of the InferenceServer facade, shared by front ends.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model_spec.h"
#include "metrics/model_stats.h"

namespace inferd {

struct TensorMetadata {
  std::string name;
  DataType dtype;
  Shape shape;  // as clients send it: -1 = variable (batch dim included when batching)
};

struct ModelMetadata {
  std::string name;
  std::vector<std::string> versions;  // loaded versions, ascending
  std::string platform;
  std::string resolved_version;  // the version this metadata describes
  int max_batch_size = 0;
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

struct ServerMetadata {
  std::string name;
  std::string version;
  std::vector<std::string> extensions;
};

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
  };
  struct Model {
    std::string name;
    std::string state;  // READY | LOADING | UNAVAILABLE
    std::string reason;
    std::string default_version;
    std::vector<Version> versions;
    std::vector<std::pair<std::string, std::string>> labels;
    uint64_t resident_bytes = 0;
    bool pinned = false;
    int64_t idle_ms = -1;  // since the last request; -1 when not resident
  };
  std::string residency;  // eager | on-demand
  uint64_t budget_bytes = 0, used_bytes = 0;
  std::vector<Model> models;
};

struct DurationSnapshot {
  uint64_t count = 0, ns = 0;
};

struct ModelStatsSnapshot {
  std::string name, version;
  uint64_t last_inference_ms = 0, inference_count = 0, execution_count = 0;
  DurationSnapshot success, fail, queue, compute_input, compute_infer, compute_output;
  std::vector<ModelStats::BatchStat> batch_stats;
};

}  // namespace inferd

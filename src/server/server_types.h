// Plain result types of the InferenceServer facade, shared by front ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/model_spec.h"
#include "manager/model_views.h"
#include "manager/quantization_guard.h"
#include "metrics/model_stats.h"

namespace inferd {

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

struct DurationSnapshot {
  uint64_t count = 0, ns = 0;
};

// Adaptive batching's estimates and padding's counters of one model version.
struct BatchingSnapshot {
  bool adaptive = false, padding = false;
  double arrival_rows_per_s = 0, cost_fixed_us = 0, cost_per_row_us = 0, cost_per_position_us = 0;
  bool cost_fitted = false;
  uint64_t cost_samples = 0, waits = 0, wait_us_total = 0, padded_elements = 0, real_elements = 0;
  double cpu_utilization = 0;
};

struct ModelStatsSnapshot {
  std::string name, version;
  uint64_t last_inference_ms = 0, inference_count = 0, execution_count = 0;
  DurationSnapshot success, fail, queue, compute_input, compute_infer, compute_output;
  DurationSnapshot cache_hit, cache_miss;
  std::vector<ModelStats::BatchStat> batch_stats;
  // Request latency (success), Prometheus' histogram (the web console's percentiles).
  Histogram::Snapshot request_us;
  // batching.mode adaptive / batching.pad_inputs (docs/batching.md); unset otherwise.
  std::optional<BatchingSnapshot> batching;
  // parameter quantization "int8" (docs/quantization.md); unset otherwise.
  std::optional<QuantizationReport> quantization;
};

}  // namespace inferd

// ModelSpec: a validated model configuration in plain C++ types.
//
// The repository module parses config.pbtxt (protobuf text) and produces a
// ModelSpec; everything downstream (backends, scheduler, server, front ends)
// sees only this struct, so protobuf stays inside src/repository.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/batching_spec.h"
#include "core/compare_spec.h"
#include "core/datatype.h"
#include "core/feature_spec.h"
#include "core/output_rule.h"
#include "core/precomputed_spec.h"
#include "core/tensor.h"

namespace inferd {

struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  Shape dims;                    // without the batch dimension; -1 = variable
  std::optional<Shape> reshape;  // shape the backend sees (without batch dim)
  bool optional = false;
  // allow_ragged_batch (Triton's ragged batching): requests' shapes may differ;
  // the backend gets the batch's elements concatenated as one 1-D tensor.
  bool ragged = false;
  bool any_rank = false;  // auto-completed: rank unknown, any shape accepted
  // Auto-completed output whose datatype the model does not state: `dtype`
  // (FP32) is what metadata shows; answers carry the datatype produced.
  bool dtype_assumed = false;
  // Outputs: label_filename (in the model folder) and its lines, read with
  // the config; labels for classification answers. Null without a file.
  std::string label_filename;
  std::shared_ptr<const std::vector<std::string>> labels;
};

struct QueuePolicySpec {
  bool delay_on_timeout = false;    // timeout_action DELAY (else REJECT)
  uint64_t default_timeout_us = 0;  // 0 = no timeout
  bool allow_timeout_override = false;
  uint32_t max_queue_size = 0;  // 0 = the server's default bound
};

struct BatchingSpec {
  bool dynamic = false;                    // dynamic_batching present (and max_batch_size > 0)
  std::vector<int> preferred_batch_sizes;  // ascending
  uint64_t max_queue_delay_us = 0;
  uint32_t priority_levels = 0;  // 0 = priorities off
  uint32_t default_priority_level = 0;
  QueuePolicySpec queue;
  bool preserve_ordering = false;
  // Parameters "batching.*" (core/batching_spec.h, docs/batching.md).
  AdaptiveBatchingSpec adaptive;
  std::optional<PaddingSpec> padding;
};

// batch_input: a tensor the server computes from the formed batch and gives
// the backend after the config's inputs (Triton's ragged batching). Values
// are per request, in batch order, over `source`'s elements (its batch
// dimension excluded; requests to a model with ragged inputs have one row).
struct BatchInputSpec {
  enum class Kind {
    kElementCount,                     // [n]: each request's element count
    kAccumulatedElementCount,          // [n]: running sums
    kAccumulatedElementCountWithZero,  // [n + 1]: 0, then the running sums
    kMaxElementCountAsShape,           // [max element count], zeros: only its shape carries information
    kItemShape,                        // [n, rank]: each request's shape (without the batch dimension)
    kItemShapeFlatten,                 // [n * rank]
  } kind = Kind::kElementCount;
  std::string target;  // the input name the backend sees
  DataType dtype = DataType::kInt32;
  std::string source;       // a config input
  size_t source_index = 0;  // its index in ModelSpec::inputs
};

struct VersionPolicySpec {
  enum class Kind { kLatest, kAll, kSpecific } kind = Kind::kLatest;
  uint32_t latest_n = 1;
  std::vector<int64_t> versions;  // for kSpecific
};

// model_warmup: requests run on every instance before a version is READY.
struct WarmupInputSpec {
  DataType dtype = DataType::kInvalid;
  Shape dims;  // without the batch dimension
  enum class Source { kZero, kRandom, kFile } source = Source::kZero;
  std::string file;  // kFile: path relative to <model>/warmup/, raw little-endian bytes
};
struct WarmupSpec {
  std::string name;
  uint32_t batch_size = 1;  // rows (models with max_batch_size > 0)
  uint32_t count = 1;       // times each sample runs
  std::map<std::string, WarmupInputSpec> inputs;
};

// platform "ensemble": ensemble_scheduling's steps (Triton's ensembles).
struct EnsembleStepSpec {
  std::string model_name;
  int64_t model_version = -1;  // -1: the model's default version
  // Composing model's tensor name -> ensemble tensor name.
  std::map<std::string, std::string> input_map, output_map;
};
struct EnsembleSpec {
  std::vector<EnsembleStepSpec> steps;
  uint32_t max_inflight = 0;  // requests in flight through the ensemble (0 = no bound)
};

struct ModelSpec {
  std::string name;
  std::string platform;  // e.g. "pytorch_libtorch"
  std::string backend;   // resolved backend name: "pytorch", "identity"
  // The scheduler the backend's models need ("" = the default; backend.h contract 13).
  std::string scheduler_kind;
  int max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;           // empty (auto-completed) = whatever the model returns
  std::vector<BatchInputSpec> batch_inputs;  // config batch_input, in order
  BatchingSpec batching;
  int instance_count = 1;
  VersionPolicySpec version_policy;
  std::map<std::string, std::string> parameters;  // parameters { key: { string_value } }
  std::vector<WarmupSpec> warmup;
  std::string default_model_filename;
  bool auto_completed = false;
  // model_transaction_policy { decoupled: true }: zero or more responses per
  // request (backend.h contract 12).
  bool decoupled = false;
  // response_cache { enable: true }: successful answers are cached (server/response_cache.h).
  bool response_cache = false;
  std::optional<EnsembleSpec> ensemble;  // set exactly when platform is "ensemble"
  // Parameters "rule:<name>": outputs the server computes from the model's
  // (core/output_rule.h), by name.
  std::vector<OutputRule> rules;
  // Parameters "precomputed.*": hybrid serving from a prediction table
  // (core/precomputed_spec.h; server/hybrid_serving.h).
  std::optional<PrecomputedSpec> precomputed;
  // Parameters "features.*": an input filled from Redis by an entity key
  // (core/feature_spec.h; features/).
  std::optional<FeatureSpec> features;
  // How shadow and canary answers are judged (label files, "compare.*";
  // core/compare_spec.h).
  CompareSpec compare;

  // The tensors a backend's Execute receives: `inputs` (ragged ones as 1-D),
  // then one per batch input (dims [-1]).
  std::vector<TensorSpec> BackendInputs() const {
    std::vector<TensorSpec> all = inputs;
    for (const auto& b : batch_inputs) {
      TensorSpec t;
      t.name = b.target;
      t.dtype = b.dtype;
      t.dims = {-1};
      all.push_back(std::move(t));
    }
    return all;
  }
  bool HasRaggedInputs() const {
    for (const auto& t : inputs)
      if (t.ragged) return true;
    return false;
  }

  const TensorSpec* FindInput(std::string_view n) const {
    for (const auto& t : inputs)
      if (t.name == n) return &t;
    return nullptr;
  }
  const TensorSpec* FindOutput(std::string_view n) const {
    for (const auto& t : outputs)
      if (t.name == n) return &t;
    return nullptr;
  }
  const OutputRule* FindRule(std::string_view n) const {
    for (const auto& r : rules)
      if (r.name == n) return &r;
    return nullptr;
  }
};

// `tensors` (inputs or outputs of `spec`) as clients see them: the batch dimension first (-1) when the model
// batches, one -1 for an auto-completed tensor of unknown rank.
inline std::vector<TensorMetadata> ClientTensors(const ModelSpec& spec, const std::vector<TensorSpec>& tensors) {
  std::vector<TensorMetadata> out;
  for (const auto& t : tensors) {
    TensorMetadata m{t.name, t.dtype, {}};
    if (spec.max_batch_size > 0) m.shape.push_back(-1);
    if (t.any_rank) m.shape.push_back(-1);
    m.shape.insert(m.shape.end(), t.dims.begin(), t.dims.end());
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace inferd

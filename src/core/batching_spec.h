// Batching settings beyond Triton's dynamic_batching block, parsed from a
// model's `batching.*` config parameters (docs/batching.md):
//
//   batching.mode               fixed (default: Triton's rule, max_queue_delay_microseconds) | adaptive
//   batching.max_delay_us       adaptive: the longest a request may wait for a batch to fill (default: the
//                               config's max_queue_delay_microseconds, or 10000 when that is 0)
//   batching.latency_target_us  adaptive: a waiting batch goes out early enough that its oldest request's
//                               queue time plus the predicted execution time stays within this (0 = none)
//   batching.pad_inputs         inputs padded along their one variable dimension, `name` or `name:value`
//                               (pad value, default 0), comma-separated; the first gives a request's length
//   batching.mask_input         an input the server fills with 1 for real positions and 0 for padding when
//                               a request leaves it out (padded with 0 when a request sends it)
//   batching.buckets            padded lengths, ascending: a batch is padded to the smallest bucket that holds
//                               its longest request, and a batch holds requests of one bucket; longer requests
//                               batch only with requests of their own length (default: none; a batch is
//                               padded to its longest request)
//   batching.unpad_outputs      outputs cut back to each request's length along their first non-batch
//                               dimension (default: the outputs whose config dims start with -1)
//
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace inferd {

struct ModelSpec;

struct AdaptiveBatchingSpec {
  bool enabled = false;
  uint64_t max_delay_us = 0;       // resolved: > 0 when enabled
  uint64_t latency_target_us = 0;  // 0 = none
  bool cpu_aware = false;          // weigh the CPU a wait saves by the machine's load
};

struct PaddedInput {
  std::string name;
  size_t input = 0;  // index in ModelSpec::inputs
  size_t axis = 0;   // the variable dimension, counting the batch dimension (>= 1)
  double pad_value = 0;
  bool mask = false;      // the mask input: filled by the server when left out
  std::string pad_bytes;  // one element of the input's datatype holding pad_value
  std::string one_bytes;  // mask input: one element holding 1
};

struct PaddingSpec {
  std::vector<PaddedInput> inputs;  // the mask input last, when there is one
  std::vector<int64_t> buckets;     // ascending; empty = pad to the longest request
  std::vector<std::string> unpad_outputs;

  // The padded input with this ModelSpec::inputs index, or null.
  const PaddedInput* Find(size_t input) const {
    for (const auto& p : inputs)
      if (p.input == input) return &p;
    return nullptr;
  }
  const PaddedInput* mask() const { return !inputs.empty() && inputs.back().mask ? &inputs.back() : nullptr; }
  // The length a batch whose longest request has `length` positions is padded to.
  int64_t PaddedLength(int64_t length) const {
    for (int64_t b : buckets)
      if (b >= length) return b;
    return length;
  }
  // The group a request of `length` batches with: its bucket; beyond the
  // last bucket its own length (so one long request never pads a batch of
  // others up to it); 0 for every length without buckets (padded to the
  // batch's longest).
  int64_t Group(int64_t length) const { return buckets.empty() ? 0 : PaddedLength(length); }
  // Groups beyond the last bucket share one arrival-rate estimate (-1).
  int64_t RateKey(int64_t group) const { return !buckets.empty() && group > buckets.back() ? -1 : group; }
};

inline constexpr const char* kBatchingPrefix = "batching.";

// The model's `batching.*` parameters. INVALID_ARGUMENT "field
// 'parameters.batching.<name>': <why>". `model` must have its inputs,
// outputs, max_batch_size and dynamic_batching parsed.
struct BatchingParameters {
  AdaptiveBatchingSpec adaptive;
  std::optional<PaddingSpec> padding;
};
Result<BatchingParameters> ParseBatchingParameters(const std::map<std::string, std::string>& parameters,
                                                   const ModelSpec& model);

}  // namespace inferd

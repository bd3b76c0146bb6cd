// Assembles a feature input from one entity's Redis values (pure; no I/O).
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "core/feature_spec.h"
#include "core/model_spec.h"
#include "core/tensor.h"
#include "redis/redis_client.h"

namespace inferd::features {

// The Redis key of `entity` under `spec`.
inline std::string RedisKey(const FeatureSpec& spec, const std::string& entity) { return spec.key_prefix + entity; }

struct Assembled {
  Tensor tensor;         // `spec.input`, shape [1, dims...] for a batched model, else dims
  size_t defaulted = 0;  // features that took their default
};

// `values` holds one value per spec.names (nullopt: missing). A missing
// feature takes its default; without one the result is NOT_FOUND naming the
// entity, its Redis key and the features; a value that is not a number (or
// does not fit the input's type) is INTERNAL naming the feature: the
// feature store holds bad data, the request is not at fault.
Result<Assembled> AssembleFeatures(const FeatureSpec& spec, const TensorSpec& input, bool batched,
                                   const std::string& entity, const redis::FieldValues& values);

}  // namespace inferd::features

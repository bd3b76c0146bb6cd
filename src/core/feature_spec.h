// FeatureSpec: online feature lookup settings of a model (docs/features.md),
// parsed from its config's `features.*` parameters:
//
//   features.connection     a named redis connection of the jobs config; required
//   features.key_parameter  the request parameter that carries the entity key (e.g. user_id); required
//   features.key_prefix     the Redis key is <key_prefix><entity> (default ""), a hash
//   features.input          the input the features fill, in order; required
//   features.names          the hash fields, comma-separated, one per element of the input; required
//   features.defaults       comma-separated values for fields that are missing, aligned with names (an
//                           empty entry: that feature has none), or one value for all; default: none
//
// A request that carries the key parameter and not the input gets the input
// from Redis (HMGET); a missing field takes its default, or the request fails
// with NOT_FOUND naming the entity and the fields.
//
// Thread-safety: plain values.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace inferd {

struct ModelSpec;

struct FeatureSpec {
  std::string connection;
  std::string key_parameter;
  std::string key_prefix;
  std::string input;
  std::vector<std::string> names;
  std::vector<std::optional<double>> defaults;  // one per name (nullopt: no default)
};

inline constexpr const char* kFeaturesPrefix = "features.";

// The model's `features.*` parameters; nullopt when it has none.
// INVALID_ARGUMENT "field 'parameters.features.<name>': <why>". `model` must
// have its inputs parsed: the input must be numeric with fixed dims holding
// exactly one element per name.
Result<std::optional<FeatureSpec>> ParseFeatureSpec(const std::map<std::string, std::string>& parameters,
                                                    const ModelSpec& model);

}  // namespace inferd

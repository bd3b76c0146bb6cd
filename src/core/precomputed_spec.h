// PrecomputedSpec: hybrid serving's settings of a model (docs/hybrid.md),
// parsed from its config's `precomputed.*` parameters:
//
//   precomputed.connection      a named connection of the jobs config (sqlite, postgres or redis); required
//   precomputed.table           the prediction table (a batch job's sink table); required
//   precomputed.key_parameter   the request parameter that carries the key (default "key")
//   precomputed.key_input       or: an input of one element (BYTES or an integer type) that is the key
//   precomputed.key_column      the table's key column (default: the key parameter's or input's name, as a
//                               batch job names it after its source's key column)
//   precomputed.outputs         the stored outputs, comma-separated (default: every output and rule output)
//   precomputed.max_age_seconds a row older than this is stale (default 0: no limit)
//   precomputed.version         serving (default: a row must come from the serving version) | any
//   precomputed.write_back      true: an online answer is written to the table (default false)
//   precomputed.on_store_error  online (default: answer online when the store fails) | fail (503)
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

struct PrecomputedSpec {
  std::string connection;
  std::string table;
  std::string key_parameter = "key";
  std::string key_input;             // "" = the key comes from key_parameter
  std::string key_column;            // resolved: never empty after parsing
  std::vector<std::string> outputs;  // resolved: never empty after parsing
  int64_t max_age_seconds = 0;       // 0 = no limit
  bool any_version = false;
  bool write_back = false;
  bool fail_on_store_error = false;
};

inline constexpr const char* kPrecomputedPrefix = "precomputed.";

// The model's `precomputed.*` parameters; nullopt when it has none.
// INVALID_ARGUMENT "field 'parameters.precomputed.<name>': <why>" for a
// missing, unknown or malformed one, or names the model does not have.
// `model` must have its inputs, outputs and rules parsed.
Result<std::optional<PrecomputedSpec>> ParsePrecomputedSpec(const std::map<std::string, std::string>& parameters,
                                                            const ModelSpec& model);

}  // namespace inferd

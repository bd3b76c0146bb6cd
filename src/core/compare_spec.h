// CompareSpec: how a shadow's (or a canary's mirrored) answer is judged
// against the answer the client got (server/shadow_compare.h), parsed from
// the model's config:
//
//   outputs with a label_filename   classifier outputs: judged by the top-1 class of each row
//   compare.classifier_outputs      more classifier outputs, comma-separated (each must be declared)
//   compare.tolerance               numeric outputs agree when every element is within
//                                   tolerance * (1 + |served value|); default 1e-4
//
// Every other numeric output is compared element by element, whatever its
// shape: a regression model whose outputs all move by +100 disagrees, even
// with several values per row. Outputs a request asks the classification
// extension for are judged by top-1 too (the shadow's raw answer has no
// classification applied).
//
// Thread-safety: plain values.
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/status.h"

namespace inferd {

struct ModelSpec;

struct CompareSpec {
  std::set<std::string> classifier_outputs;
  double tolerance = 1e-4;
};

inline constexpr const char* kComparePrefix = "compare.";

// INVALID_ARGUMENT naming the parameter for an unknown `compare.*` key, an
// output the config does not declare, or a tolerance that is not a finite
// number >= 0. `spec`'s outputs (with their label files) must be parsed.
Result<CompareSpec> ParseCompareSpec(const std::map<std::string, std::string>& parameters, const ModelSpec& spec);

}  // namespace inferd

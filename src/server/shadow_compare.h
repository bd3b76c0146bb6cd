// Comparing a shadow version's answer with the one the client got.
//
// Outputs are matched by name. Two answers agree when every output of the
// served answer is in the shadow's with the same datatype and shape, and:
// for a classifier output (`rules.classifier_outputs`: from the config's label
// files and `compare.classifier_outputs`, core/compare_spec.h) the top-1 class
// of every row is the same; for every other numeric output, every element is
// within `rules.tolerance` (scaled by 1 + |served value|), whatever its shape;
// for BYTES, the bytes are equal. Whether an output is a classifier comes from
// the config, never from its shape: a regression canary off by +100 disagrees.
// The largest absolute difference of numeric elements is reported either way.
//
// Thread-safety: pure functions.
#pragma once

#include "core/compare_spec.h"
#include "core/infer_request.h"

namespace inferd {

struct ShadowVerdict {
  bool agreed = false;
  double max_abs_diff = 0;  // over numeric outputs present in both
  std::string why;          // when not agreed: the first difference found
};

ShadowVerdict CompareAnswers(const InferResponse& served, const InferResponse& shadow, const CompareSpec& rules = {});

}  // namespace inferd
